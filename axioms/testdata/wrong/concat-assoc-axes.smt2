; WRONG: concat is associative across different axes
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (concat 0 (concat 1 x y) z) (concat 1 x (concat 0 y z)))) :named concat-assoc-axes))
