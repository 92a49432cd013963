; Convolution conv2d(stride, padding, activation, groups, input, kernel).
; s p c g are parameters, x y z tensors, w a scalar tensor. From TASO
; Table 2.2 (groups made explicit) unless a comment says "added".

; a scalar factor moves between input and kernel
(assert (! (forall ((s Int) (p Int) (c Int) (g Int) (x Tensor) (y Tensor) (w Tensor)) (= (conv2d s p c g (smul x w) y) (conv2d s p c g x (smul y w)))) :named conv-smul-operands))
; without activation, a scalar factor moves out of the convolution
(assert (! (forall ((s Int) (p Int) (g Int) (x Tensor) (y Tensor) (w Tensor)) (= (smul (conv2d s p activation.none g x y) w) (conv2d s p activation.none g (smul x w) y))) :named conv-smul-out))
; without activation, convolution is linear in its kernel
(assert (! (forall ((s Int) (p Int) (g Int) (x Tensor) (y Tensor) (z Tensor)) (= (conv2d s p activation.none g x (ewadd y z)) (ewadd (conv2d s p activation.none g x y) (conv2d s p activation.none g x z)))) :named conv-ewadd-kernel))
; without activation, convolution is linear in its input
(assert (! (forall ((s Int) (p Int) (g Int) (x Tensor) (y Tensor) (z Tensor)) (= (conv2d s p activation.none g (ewadd x y) z) (ewadd (conv2d s p activation.none g x z) (conv2d s p activation.none g y z)))) :named conv-ewadd-input))
; with stride 1 and same padding, a kernel padded with zeros to k×k gives the same result (TASO states it for any stride; SAME padding is asymmetric when strided, and the concrete check finds it false)
(assert (! (forall ((c Int) (g Int) (k Int) (x Tensor) (y Tensor)) (= (conv2d 1 padding.same c g x y) (conv2d 1 padding.same c g x (enlarge k y)))) :named conv-enlarge))
; relu activation is relu applied to the convolution
(assert (! (forall ((s Int) (p Int) (g Int) (x Tensor) (y Tensor)) (= (conv2d s p activation.relu g x y) (relu (conv2d s p activation.none g x y)))) :named conv-relu))
; enlarging commutes with relu, since relu keeps the padding's zeros (added: relu of an enlarged kernel)
(assert (! (forall ((k Int) (x Tensor)) (= (relu (enlarge k x)) (enlarge k (relu x)))) :named enlarge-relu))
; enlarging commutes with ewadd (added: sums of enlarged kernels)
(assert (! (forall ((k Int) (x Tensor) (y Tensor)) (= (ewadd (enlarge k x) (enlarge k y)) (enlarge k (ewadd x y)))) :named enlarge-ewadd))
; enlarging commutes with ewmul, since a product with padding is padding (added: products of enlarged kernels)
(assert (! (forall ((k Int) (x Tensor) (y Tensor)) (= (ewmul (enlarge k x) (enlarge k y)) (enlarge k (ewmul x y)))) :named enlarge-ewmul))
; enlarging commutes with scalar multiplication (added: scaled enlarged kernels)
(assert (! (forall ((k Int) (x Tensor) (w Tensor)) (= (smul (enlarge k x) w) (enlarge k (smul x w)))) :named enlarge-smul))
