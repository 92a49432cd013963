; Pooling pool_avg/pool_max(kernel, stride, padding, input). From TASO
; Table 2.2 unless a comment says "added", with the reason.

; average pooling is a depth-wise convolution with the constant kernel C_pool
(assert (! (forall ((k Int) (s Int) (p Int) (g Int) (x Tensor)) (= (conv2d s p activation.none g x (C_pool k)) (pool_avg k s p x))) :named pool-avg-as-conv))
; max pooling commutes with relu (added: pool_max of relu candidates)
(assert (! (forall ((k Int) (s Int) (p Int) (x Tensor)) (= (pool_max k s p (relu x)) (relu (pool_max k s p x)))) :named pool-max-relu))
; average pooling commutes with scalar multiplication (added: the conv route needs a groups value E-matching cannot invent)
(assert (! (forall ((k Int) (s Int) (p Int) (x Tensor) (w Tensor)) (= (pool_avg k s p (smul x w)) (smul (pool_avg k s p x) w))) :named pool-avg-smul))
; average pooling is linear over ewadd (added: as pool-avg-smul)
(assert (! (forall ((k Int) (s Int) (p Int) (x Tensor) (y Tensor)) (= (pool_avg k s p (ewadd x y)) (ewadd (pool_avg k s p x) (pool_avg k s p y)))) :named pool-avg-ewadd))
; average pooling commutes with a stride-1 convolution by a 1×1 kernel (added: PET's partially equivalent transformations; holds only where the shape condition does, since a 1×1 kernel mixes channels pixel by pixel, and pool_avg counts padded cells as zeros, which a bias-free convolution keeps)
(assert (! (forall ((k Int) (s Int) (p Int) (q Int) (g Int) (x Tensor) (w Tensor)) (=> (kernel w 1 1) (= (conv2d 1 q activation.none g (pool_avg k s p x) w) (pool_avg k s p (conv2d 1 q activation.none g x w))))) :named pool-avg-conv1x1))
