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
