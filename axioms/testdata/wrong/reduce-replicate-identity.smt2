; reducing replicated partial sums gives the tensor back (wrong: reduce adds the partial sums and leaves the copies, so the layout differs)
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (reduce d (replicate d x)) x))) :named reduce-replicate-identity))
