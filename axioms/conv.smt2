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
