; relu commutes with reduce (wrong: relu(p1 + p2) is not relu(p1) + relu(p2); relu takes no partial sums, and reduce nothing else, so at degree 2 and above no layout lays out both sides)
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 2) (= (relu (reduce d x)) (reduce d (relu x))))) :named relu-reduce))
