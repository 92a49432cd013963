; a lookup in tables side by side is the lookups side by side, in the other order (wrong: the columns keep their order)
(assert (! (forall ((x Tensor) (w Tensor) (z Tensor)) (= (embedding x (concat 1 w z)) (concat 1 (embedding x z) (embedding x w)))) :named embedding-concat-swapped))
