; relu commutes with reduce (wrong: relu(p1 + p2) is not relu(p1) + relu(p2), and even on copies relu(d·x) = d·relu(x) fails in the exact modular semantics)
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (relu (reduce d x)) (reduce d (relu x))))) :named relu-reduce))
