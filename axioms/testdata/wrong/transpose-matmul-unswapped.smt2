; WRONG: transpose distributes over matmul without swapping the operands
(assert (! (forall ((x Tensor) (y Tensor)) (= (transpose (matmul x y)) (matmul (transpose x) (transpose y)))) :named transpose-matmul-unswapped))
