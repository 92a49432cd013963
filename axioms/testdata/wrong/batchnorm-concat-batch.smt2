; batches side by side are normalised side by side (wrong: each half has its own statistics, the ghost normalisation that data parallelism without SyncBatchNorm computes)
(assert (! (forall ((x Tensor) (y Tensor)) (= (batchnorm (concat 0 x y)) (concat 0 (batchnorm x) (batchnorm y)))) :named batchnorm-concat-batch))
