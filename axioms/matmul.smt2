; Matrix multiplication. From TASO Table 2.2 unless a comment says "added",
; with the reason. The left-sided forms follow from the right-sided ones
; through transpose, but E-matching cannot find that derivation.

; matmul is associative
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (matmul x (matmul y z)) (matmul (matmul x y) z))) :named matmul-assoc))
; matmul is linear in its second operand under scalar multiplication
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (smul (matmul x y) w) (matmul x (smul y w)))) :named matmul-smul))
; matmul distributes over ewadd in its second operand
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (matmul x (ewadd y z)) (ewadd (matmul x y) (matmul x z)))) :named matmul-ewadd))
; the transpose of a product is the product of transposes, swapped
(assert (! (forall ((x Tensor) (y Tensor)) (= (transpose (matmul x y)) (matmul (transpose y) (transpose x)))) :named matmul-transpose))
; matmul is linear in its first operand under scalar multiplication (added: E-matching cannot derive it through transpose)
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (matmul (smul x w) y) (smul (matmul x y) w))) :named matmul-smul-left))
; matmul distributes over ewadd in its first operand (added: as above)
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (matmul (ewadd x y) z) (ewadd (matmul x z) (matmul y z)))) :named matmul-ewadd-left))
