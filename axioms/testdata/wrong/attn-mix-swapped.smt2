; the mix commutes (wrong: it is a product, whose operands do not commute)
(assert (! (forall ((w Tensor) (v Tensor)) (= (attn_mix w v) (attn_mix v w))) :named attn-mix-swapped))
