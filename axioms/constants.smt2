; The constant tensors I_conv, I_matmul, I_ewmul and C_pool. From TASO
; Table 2.2 unless a comment says "added", with the reason.

; the identity kernel leaves an input unchanged under stride-1 same convolution
(assert (! (forall ((k Int) (x Tensor)) (= (conv2d 1 padding.same activation.none 1 x (I_conv k)) x)) :named iconv-identity))
; the identity matrix is a right identity of matmul
(assert (! (forall ((x Tensor)) (= (matmul x I_matmul) x)) :named imatmul-identity))
; the tensor of ones is an identity of ewmul
(assert (! (forall ((x Tensor)) (= (ewmul x I_ewmul) x)) :named iewmul-identity))
; the identity matrix is a left identity of matmul (added: as matmul-smul-left)
(assert (! (forall ((x Tensor)) (= (matmul I_matmul x) x)) :named imatmul-left-identity))
