; normalising a normalised tensor changes nothing (wrong: its variance is v/(v+ε), not 1, so a second normalisation scales each channel again)
(assert (! (forall ((x Tensor)) (= (batchnorm (batchnorm x)) (batchnorm x))) :named batchnorm-idempotent))
