; WRONG: convolution is linear in its input even with relu activation
(assert (! (forall ((s Int) (p Int) (g Int) (x Tensor) (y Tensor) (z Tensor)) (= (conv2d s p activation.relu g (ewadd x y) z) (ewadd (conv2d s p activation.relu g x z) (conv2d s p activation.relu g y z)))) :named conv-relu-linear))
