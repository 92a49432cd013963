; the softmax is linear in its queries (wrong: a softmax of a sum is not the sum of softmaxes)
(assert (! (forall ((q Tensor) (r Tensor) (k Tensor)) (= (attn_softmax (ewadd q r) k) (ewadd (attn_softmax q k) (attn_softmax r k)))) :named attn-softmax-ewadd))
