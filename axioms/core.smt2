; Element-wise operators, scalar multiplication, transpose and relu.
; Variables x y z are tensors, w a scalar tensor. Each axiom was added for a
; property the generated candidates use (TASO Table 2.2 unless noted).

; ewadd is associative
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ewadd x (ewadd y z)) (ewadd (ewadd x y) z))) :named ewadd-assoc))
; ewadd is commutative
(assert (! (forall ((x Tensor) (y Tensor)) (= (ewadd x y) (ewadd y x))) :named ewadd-comm))
; ewmul is associative
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ewmul x (ewmul y z)) (ewmul (ewmul x y) z))) :named ewmul-assoc))
; ewmul is commutative
(assert (! (forall ((x Tensor) (y Tensor)) (= (ewmul x y) (ewmul y x))) :named ewmul-comm))
; ewmul distributes over ewadd
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ewmul (ewadd x y) z) (ewadd (ewmul x z) (ewmul y z)))) :named ewmul-ewadd-distrib))
; scalar multiplication distributes over ewadd
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (smul (ewadd x y) w) (ewadd (smul x w) (smul y w)))) :named smul-ewadd))
; scalar multiplication commutes into an ewmul operand
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (smul (ewmul x y) w) (ewmul x (smul y w)))) :named smul-ewmul))
; transpose is its own inverse
(assert (! (forall ((x Tensor)) (= (transpose (transpose x)) x)) :named transpose-involution))
; transpose distributes over ewadd
(assert (! (forall ((x Tensor) (y Tensor)) (= (transpose (ewadd x y)) (ewadd (transpose x) (transpose y)))) :named transpose-ewadd))
; transpose distributes over ewmul
(assert (! (forall ((x Tensor) (y Tensor)) (= (transpose (ewmul x y)) (ewmul (transpose x) (transpose y)))) :named transpose-ewmul))
; transpose commutes with scalar multiplication
(assert (! (forall ((x Tensor) (w Tensor)) (= (smul (transpose x) w) (transpose (smul x w)))) :named transpose-smul))
; relu commutes with transpose
(assert (! (forall ((x Tensor)) (= (relu (transpose x)) (transpose (relu x)))) :named relu-transpose))
; relu is idempotent (added: candidates such as relu(relu(x)) => relu(x))
(assert (! (forall ((x Tensor)) (= (relu (relu x)) (relu x))) :named relu-idempotent))
; x·relu(x) equals relu(x)·relu(x) (added: products with relu of a factor)
(assert (! (forall ((x Tensor)) (= (ewmul x (relu x)) (ewmul (relu x) (relu x)))) :named relu-square))
; smul is associative (TASO Table 2.2: two scalars meet in smul(y, w))
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (smul (smul x y) w) (smul x (smul y w)))) :named smul-assoc))
; two scalar factors commute (added: the pool's two scalars meet in smul(smul(x, y), w); both sides type-check only when y and w are scalars)
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (smul (smul x y) w) (smul (smul x w) y))) :named smul-scalars-commute))
