; reducing the weight's partial sums first or the output's last is the same (wrong, as linear-reduce-input: where the contraction is cut, a reduce of the product adds its blocks, not w's partial sums)
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (linear activation.none x (reduce d w)) (reduce d (linear activation.none (replicate d x) w))))) :named linear-reduce-weight))
