; Concatenation concat(axis, x, y) and its inverse split0/split1(axis, t).
; From TASO Table 2.2 unless a comment says "added"; guarded axioms state
; one property for the axes where it holds (batch and channel).

; split0 undoes concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (= (split0 a (concat a x y)) x)) :named split0-concat))
; split1 undoes concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (= (split1 a (concat a x y)) y)) :named split1-concat))
; concatenating on one axis of concats on another equals the other way round (TASO states axes 0 and 1; generalised: any two axes)
(assert (! (forall ((a Int) (b Int) (x Tensor) (y Tensor) (z Tensor) (w Tensor)) (=> (not (= a b)) (= (concat a (concat b x y) (concat b z w)) (concat b (concat a x z) (concat a y w))))) :named concat-geometry))
; scalar multiplication commutes with concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor) (w Tensor)) (= (concat a (smul x w) (smul y w)) (smul (concat a x y) w))) :named concat-smul))
; ewadd commutes with concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor) (z Tensor) (w Tensor)) (= (concat a (ewadd x y) (ewadd z w)) (ewadd (concat a x z) (concat a y w)))) :named concat-ewadd))
; ewmul commutes with concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor) (z Tensor) (w Tensor)) (= (concat a (ewmul x y) (ewmul z w)) (ewmul (concat a x z) (concat a y w)))) :named concat-ewmul))
; relu commutes with concat
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (= (concat a (relu x) (relu y)) (relu (concat a x y)))) :named concat-relu))
; products with a shared left operand concatenate column-wise
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (concat 1 (matmul x y) (matmul x z)) (matmul x (concat 1 y z)))) :named concat-matmul))
; a product of concats along the inner dimension is a sum of products
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor) (w Tensor)) (= (matmul (concat 1 x z) (concat 0 y w)) (ewadd (matmul x y) (matmul z w)))) :named matmul-concat-inner))
; convolutions of a batch concat are a batch concat of convolutions
(assert (! (forall ((s Int) (p Int) (c Int) (g Int) (x Tensor) (y Tensor) (z Tensor)) (= (concat 0 (conv2d s p c g x z) (conv2d s p c g y z)) (conv2d s p c g (concat 0 x y) z))) :named concat-conv-batch))
; ungrouped convolutions with kernels concatenated on output channels concatenate channel-wise
(assert (! (forall ((s Int) (p Int) (c Int) (x Tensor) (y Tensor) (z Tensor)) (= (concat 1 (conv2d s p c 1 x y) (conv2d s p c 1 x z)) (conv2d s p c 1 x (concat 0 y z)))) :named concat-conv-out))
; an ungrouped convolution over channel concats is a sum of convolutions
(assert (! (forall ((s Int) (p Int) (x Tensor) (y Tensor) (z Tensor) (w Tensor)) (= (conv2d s p activation.none 1 (concat 1 x z) (concat 1 y w)) (ewadd (conv2d s p activation.none 1 x y) (conv2d s p activation.none 1 z w)))) :named conv-concat-channels))
; products with a shared right operand concatenate row-wise (added: E-matching cannot derive it through transpose)
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (concat 0 (matmul x z) (matmul y z)) (matmul (concat 0 x y) z))) :named concat-matmul-rows))
; average pooling commutes with concat on the batch and channel axes (TASO states the channel axis only; added: batch)
(assert (! (forall ((a Int) (k Int) (s Int) (p Int) (x Tensor) (y Tensor)) (=> (or (= a 0) (= a 1)) (= (concat a (pool_avg k s p x) (pool_avg k s p y)) (pool_avg k s p (concat a x y))))) :named concat-pool-avg))
; max pooling commutes with concat on the batch and channel axes (TASO: two axioms, merged with a guard)
(assert (! (forall ((a Int) (k Int) (s Int) (p Int) (x Tensor) (y Tensor)) (=> (or (= a 0) (= a 1)) (= (concat a (pool_max k s p x) (pool_max k s p y)) (pool_max k s p (concat a x y))))) :named concat-pool-max))
; transposing a row concat gives a column concat of transposes
(assert (! (forall ((x Tensor) (y Tensor)) (= (concat 1 (transpose x) (transpose y)) (transpose (concat 0 x y)))) :named concat-transpose))
; transposing a column concat gives a row concat of transposes (added: the mirror of concat-transpose, which E-matching cannot derive through transpose-involution)
(assert (! (forall ((x Tensor) (y Tensor)) (= (concat 0 (transpose x) (transpose y)) (transpose (concat 1 x y)))) :named concat-transpose-rows))
; enlarging commutes with concat on output channels (added: kernels concatenated before or after padding)
(assert (! (forall ((k Int) (x Tensor) (y Tensor)) (= (concat 0 (enlarge k x) (enlarge k y)) (enlarge k (concat 0 x y)))) :named concat-enlarge))
