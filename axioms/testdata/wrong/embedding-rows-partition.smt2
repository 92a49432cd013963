; a table cut by rows, looked up by copies of the indices, gives the output rows cut (wrong: each piece looks up its own rows for every index and leaves zeros for the rest, d partial sums of the whole output)
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (embedding (replicate d x) (partition 0 d w)) (partition 0 d (embedding x w))))) :named embedding-rows-partition))
