; reducing replicated copies gives the tensor back (wrong: it gives d times the tensor; Unity §5.3)
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (reduce d (replicate d x)) x))) :named reduce-replicate-identity))
