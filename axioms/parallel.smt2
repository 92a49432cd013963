; Unity's parallelization operators partition(dim, degree), combine(dim,
; degree), replicate(degree) and reduce(degree), and FlexFlow's
; linear(activation, input, weight) (docs/parallel.md). a b are dimensions,
; d e degrees (every degree d >= 1), c an activation, x y z w tensors. Each
; holds piece for piece, layout and values, wherever both sides are laid
; out validly, at every combined layout 'axioms check' tries.

; combine undoes partition
(assert (! (forall ((a Int) (d Int) (x Tensor)) (=> (>= d 1) (= (combine a d (partition a d x)) x))) :named combine-partition))
; partition undoes combine
(assert (! (forall ((a Int) (d Int) (x Tensor)) (=> (>= d 1) (= (partition a d (combine a d x)) x))) :named partition-combine))
; a partition and a combine on different dimensions commute
(assert (! (forall ((a Int) (b Int) (d Int) (e Int) (x Tensor)) (=> (and (>= d 1) (>= e 1) (not (= a b))) (= (partition a d (combine b e x)) (combine b e (partition a d x))))) :named partition-combine-commute))
; partitions commute, on any two dimensions
(assert (! (forall ((a Int) (b Int) (d Int) (e Int) (x Tensor)) (=> (and (>= d 1) (>= e 1)) (= (partition a d (partition b e x)) (partition b e (partition a d x))))) :named partition-commute))
; partition commutes with replicate
(assert (! (forall ((a Int) (d Int) (e Int) (x Tensor)) (=> (and (>= d 1) (>= e 1)) (= (partition a d (replicate e x)) (replicate e (partition a d x))))) :named partition-replicate))
; partition commutes with reduce
(assert (! (forall ((a Int) (d Int) (e Int) (x Tensor)) (=> (and (>= d 1) (>= e 1)) (= (partition a d (reduce e x)) (reduce e (partition a d x))))) :named partition-reduce))
; partition commutes with relu
(assert (! (forall ((a Int) (d Int) (x Tensor)) (=> (>= d 1) (= (partition a d (relu x)) (relu (partition a d x))))) :named partition-relu))
; partition distributes over ewadd
(assert (! (forall ((a Int) (d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (partition a d (ewadd x y)) (ewadd (partition a d x) (partition a d y))))) :named partition-ewadd))
; partition distributes over ewmul
(assert (! (forall ((a Int) (d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (partition a d (ewmul x y)) (ewmul (partition a d x) (partition a d y))))) :named partition-ewmul))
; combine commutes with relu
(assert (! (forall ((a Int) (d Int) (x Tensor)) (=> (>= d 1) (= (combine a d (relu x)) (relu (combine a d x))))) :named combine-relu))
; combine distributes over a concat on another axis
(assert (! (forall ((a Int) (b Int) (d Int) (x Tensor) (y Tensor)) (=> (and (>= d 1) (not (= a b))) (= (combine a d (concat b x y)) (concat b (combine a d x) (combine a d y))))) :named combine-concat))
; partition distributes over a concat on another axis
(assert (! (forall ((a Int) (b Int) (d Int) (x Tensor) (y Tensor)) (=> (and (>= d 1) (not (= a b))) (= (partition a d (concat b x y)) (concat b (partition a d x) (partition a d y))))) :named partition-concat))
; replicate commutes with relu
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (replicate d (relu x)) (relu (replicate d x))))) :named replicate-relu))
; replicate distributes over ewadd
(assert (! (forall ((d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (replicate d (ewadd x y)) (ewadd (replicate d x) (replicate d y))))) :named replicate-ewadd))
; replicate distributes over ewmul
(assert (! (forall ((d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (replicate d (ewmul x y)) (ewmul (replicate d x) (replicate d y))))) :named replicate-ewmul))
; replicate distributes over concat
(assert (! (forall ((a Int) (d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (replicate d (concat a x y)) (concat a (replicate d x) (replicate d y))))) :named replicate-concat))
; reduce is linear: it distributes over ewadd
(assert (! (forall ((d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (reduce d (ewadd x y)) (ewadd (reduce d x) (reduce d y))))) :named reduce-ewadd))
; reduce distributes over concat
(assert (! (forall ((a Int) (d Int) (x Tensor) (y Tensor)) (=> (>= d 1) (= (reduce d (concat a x y)) (concat a (reduce d x) (reduce d y))))) :named reduce-concat))
; reduce commutes with replicate
(assert (! (forall ((d Int) (e Int) (x Tensor)) (=> (and (>= d 1) (>= e 1)) (= (reduce d (replicate e x)) (replicate e (reduce d x))))) :named reduce-replicate))
; reduce of degree 1 is the identity
(assert (! (forall ((x Tensor)) (= (reduce 1 x) x)) :named reduce-one))
; replicate of degree 1 is the identity
(assert (! (forall ((x Tensor)) (= (replicate 1 x) x)) :named replicate-one))
; relu activation is relu applied to the linear
(assert (! (forall ((x Tensor) (w Tensor)) (= (linear activation.relu x w) (relu (linear activation.none x w)))) :named linear-relu))
; without activation, linear is linear in its input
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (linear activation.none (ewadd x y) w) (ewadd (linear activation.none x w) (linear activation.none y w)))) :named linear-ewadd-input))
; without activation, linear is linear in its weight
(assert (! (forall ((x Tensor) (w Tensor) (z Tensor)) (= (linear activation.none x (ewadd w z)) (ewadd (linear activation.none x w) (linear activation.none x z)))) :named linear-ewadd-weight))
; linears of inputs concatenated on a row axis are the rows of one linear
(assert (! (forall ((a Int) (c Int) (x Tensor) (y Tensor) (w Tensor)) (= (concat a (linear c x w) (linear c y w)) (linear c (concat a x y) w))) :named linear-concat-rows))
; linears of one rank-3 input by weights concatenated on columns are the columns of one linear
(assert (! (forall ((c Int) (x Tensor) (w Tensor) (z Tensor)) (= (concat 2 (linear c x w) (linear c x z)) (linear c x (concat 1 w z)))) :named linear-concat-cols))
; data parallelism: input rows cut, weight replicated, give output rows cut
(assert (! (forall ((a Int) (c Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (linear c (partition a d x) (replicate d w)) (partition a d (linear c x w))))) :named linear-partition-rows))
; model parallelism: input replicated, weight columns cut, give a rank-3 output's columns cut
(assert (! (forall ((c Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (linear c (replicate d x) (partition 1 d w)) (partition 2 d (linear c x w))))) :named linear-partition-cols))
; linear of replicated operands is the replicated linear
(assert (! (forall ((c Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (linear c (replicate d x) (replicate d w)) (replicate d (linear c x w))))) :named linear-replicate))
; a linear whose contraction dimension is cut gives partial sums that reduce to the linear
(assert (! (forall ((a Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (reduce d (linear activation.none (partition a d x) (partition 0 d w))) (linear activation.none x w)))) :named linear-contraction))
; moving a cut between two row dimensions of a linear's input moves it between the output's rows alike
(assert (! (forall ((a Int) (b Int) (c Int) (d Int) (x Tensor) (w Tensor)) (=> (and (>= d 1) (not (= a b)) (<= a 1) (<= b 1)) (= (linear c (combine b d (partition a d x)) w) (combine b d (partition a d (linear c x w)))))) :named linear-move-row-cut))
; a linear whose input has a row dimension cut gives the same whole rows whichever row dimension it is
(assert (! (forall ((a Int) (b Int) (c Int) (d Int) (x Tensor) (w Tensor)) (=> (and (>= d 1) (not (= a b)) (<= a 1) (<= b 1)) (= (combine a d (linear c (partition a d x) w)) (combine b d (linear c (partition b d x) w))))) :named linear-row-cuts))

; Convolutions and pools on NCHW images (issue 28). Their layouts are
; conv2d's and the pools' in rules/layout.go.

; a convolution's data parallelism: input batch cut, kernel replicated, give the output batch cut
(assert (! (forall ((s Int) (p Int) (c Int) (g Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (conv2d s p c g (partition 0 d x) (replicate d w)) (partition 0 d (conv2d s p c g x w))))) :named conv-partition-batch))
; a convolution's output channels: input replicated, kernel cut by output channels, give the output channels cut
(assert (! (forall ((s Int) (p Int) (c Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (conv2d s p c 1 (replicate d x) (partition 0 d w)) (partition 1 d (conv2d s p c 1 x w))))) :named conv-partition-out-channels))
; a convolution whose input channels are cut, input and kernel alike, gives partial sums that reduce to the convolution
(assert (! (forall ((s Int) (p Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (reduce d (conv2d s p activation.none 1 (partition 1 d x) (partition 1 d w))) (conv2d s p activation.none 1 x w)))) :named conv-input-channels-reduce))
; a convolution of replicated operands is the replicated convolution
(assert (! (forall ((s Int) (p Int) (c Int) (g Int) (d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (conv2d s p c g (replicate d x) (replicate d w)) (replicate d (conv2d s p c g x w))))) :named conv-replicate))
; average pooling commutes with a cut of the batch or the channels
(assert (! (forall ((a Int) (k Int) (s Int) (p Int) (d Int) (x Tensor)) (=> (and (>= d 1) (<= a 1)) (= (partition a d (pool_avg k s p x)) (pool_avg k s p (partition a d x))))) :named pool-avg-partition))
; max pooling commutes with a cut of the batch or the channels
(assert (! (forall ((a Int) (k Int) (s Int) (p Int) (d Int) (x Tensor)) (=> (and (>= d 1) (<= a 1)) (= (partition a d (pool_max k s p x)) (pool_max k s p (partition a d x))))) :named pool-max-partition))
; average pooling commutes with replicate
(assert (! (forall ((k Int) (s Int) (p Int) (d Int) (x Tensor)) (=> (>= d 1) (= (replicate d (pool_avg k s p x)) (pool_avg k s p (replicate d x))))) :named pool-avg-replicate))
; max pooling commutes with replicate
(assert (! (forall ((k Int) (s Int) (p Int) (d Int) (x Tensor)) (=> (>= d 1) (= (replicate d (pool_max k s p x)) (pool_max k s p (replicate d x))))) :named pool-max-replicate))
; average pooling is linear, so it commutes with reduce
(assert (! (forall ((k Int) (s Int) (p Int) (d Int) (x Tensor)) (=> (>= d 1) (= (reduce d (pool_avg k s p x)) (pool_avg k s p (reduce d x))))) :named pool-avg-reduce))

; Embedding lookups: indices (n) into a table (rows, columns). Their
; layouts are embedding's in rules/embedding.go.

; a lookup's data parallelism: indices cut, table replicated, give the output rows cut
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (embedding (partition 0 d x) (replicate d w)) (partition 0 d (embedding x w))))) :named embedding-partition-indices))
; a table cut by columns, looked up by copies of the indices, gives the output columns cut
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (embedding (replicate d x) (partition 1 d w)) (partition 1 d (embedding x w))))) :named embedding-partition-columns))
; a table cut by rows gives partial sums (each piece its own rows' lookups, zeros elsewhere) that reduce to the lookup
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (reduce d (embedding (replicate d x) (partition 0 d w))) (embedding x w)))) :named embedding-rows-reduce))
; a lookup of replicated operands is the replicated lookup
(assert (! (forall ((d Int) (x Tensor) (w Tensor)) (=> (>= d 1) (= (embedding (replicate d x) (replicate d w)) (replicate d (embedding x w))))) :named embedding-replicate))
; a lookup copies rows, so a lookup in a sum of tables is the sum of the lookups
(assert (! (forall ((x Tensor) (w Tensor) (z Tensor)) (= (embedding x (ewadd w z)) (ewadd (embedding x w) (embedding x z)))) :named embedding-ewadd))
; and a lookup in a product of tables, element by element, the product of the lookups
(assert (! (forall ((x Tensor) (w Tensor) (z Tensor)) (= (embedding x (ewmul w z)) (ewmul (embedding x w) (embedding x z)))) :named embedding-ewmul))
; and a lookup in a table after relu the relu of the lookup
(assert (! (forall ((x Tensor) (w Tensor)) (= (embedding x (relu w)) (relu (embedding x w)))) :named embedding-relu))
; a lookup in tables side by side is the lookups side by side
(assert (! (forall ((x Tensor) (w Tensor) (z Tensor)) (= (embedding x (concat 1 w z)) (concat 1 (embedding x w) (embedding x z)))) :named embedding-concat-columns))

; Attention over heads: attn_softmax(q, k) gives the weights, attn_mix(w,
; v) the output. Their layouts are in rules/attention.go.

; the softmax's data and tensor parallelism: queries and keys cut alike by batch or heads give the weights cut alike
(assert (! (forall ((a Int) (d Int) (q Tensor) (k Tensor)) (=> (and (>= d 1) (<= a 1)) (= (attn_softmax (partition a d q) (partition a d k)) (partition a d (attn_softmax q k))))) :named attn-softmax-partition))
; query rows cut, keys replicated, give the weights' rows cut
(assert (! (forall ((d Int) (q Tensor) (k Tensor)) (=> (>= d 1) (= (attn_softmax (partition 2 d q) (replicate d k)) (partition 2 d (attn_softmax q k))))) :named attn-softmax-rows))
; the softmax of replicated operands is the replicated softmax
(assert (! (forall ((d Int) (q Tensor) (k Tensor)) (=> (>= d 1) (= (attn_softmax (replicate d q) (replicate d k)) (replicate d (attn_softmax q k))))) :named attn-softmax-replicate))
; batches or heads side by side give their weights side by side
(assert (! (forall ((a Int) (q Tensor) (r Tensor) (k Tensor) (l Tensor)) (=> (<= a 1) (= (attn_softmax (concat a q r) (concat a k l)) (concat a (attn_softmax q k) (attn_softmax r l))))) :named attn-softmax-concat))
; query rows side by side give their weight rows side by side
(assert (! (forall ((q Tensor) (r Tensor) (k Tensor)) (= (attn_softmax (concat 2 q r) k) (concat 2 (attn_softmax q k) (attn_softmax r k)))) :named attn-softmax-concat-rows))
; attention whose keys are its values does not depend on their order: reordering key rows reorders the weights' columns and the value rows alike
(assert (! (forall ((q Tensor) (k Tensor) (l Tensor)) (= (attn_mix (attn_softmax q (concat 2 k l)) (concat 2 k l)) (attn_mix (attn_softmax q (concat 2 l k)) (concat 2 l k)))) :named attn-keys-permute))
; the mix's data and tensor parallelism: weights and values cut alike by batch or heads give the output cut alike
(assert (! (forall ((a Int) (d Int) (w Tensor) (v Tensor)) (=> (and (>= d 1) (<= a 1)) (= (attn_mix (partition a d w) (partition a d v)) (partition a d (attn_mix w v))))) :named attn-mix-partition))
; weight rows cut, values replicated, give the output rows cut
(assert (! (forall ((d Int) (w Tensor) (v Tensor)) (=> (>= d 1) (= (attn_mix (partition 2 d w) (replicate d v)) (partition 2 d (attn_mix w v))))) :named attn-mix-rows))
; weights replicated, value columns cut, give the output columns cut
(assert (! (forall ((d Int) (w Tensor) (v Tensor)) (=> (>= d 1) (= (attn_mix (replicate d w) (partition 3 d v)) (partition 3 d (attn_mix w v))))) :named attn-mix-cols))
; the mix of replicated operands is the replicated mix
(assert (! (forall ((d Int) (w Tensor) (v Tensor)) (=> (>= d 1) (= (attn_mix (replicate d w) (replicate d v)) (replicate d (attn_mix w v))))) :named attn-mix-replicate))
; the mix is linear in its weights
(assert (! (forall ((w Tensor) (u Tensor) (v Tensor)) (= (attn_mix (ewadd w u) v) (ewadd (attn_mix w v) (attn_mix u v)))) :named attn-mix-ewadd-weights))
; the mix is linear in its values
(assert (! (forall ((w Tensor) (v Tensor) (u Tensor)) (= (attn_mix w (ewadd v u)) (ewadd (attn_mix w v) (attn_mix w u)))) :named attn-mix-ewadd-values))
; the mix is a batched product, so it is associative (it takes no partial sums, whose order would differ)
(assert (! (forall ((w Tensor) (u Tensor) (v Tensor)) (= (attn_mix (attn_mix w u) v) (attn_mix w (attn_mix u v)))) :named attn-mix-assoc))
; batches or heads side by side give their mixes side by side
(assert (! (forall ((a Int) (w Tensor) (u Tensor) (v Tensor) (z Tensor)) (=> (<= a 1) (= (attn_mix (concat a w u) (concat a v z)) (concat a (attn_mix w v) (attn_mix u z))))) :named attn-mix-concat))
; weight rows side by side give output rows side by side
(assert (! (forall ((w Tensor) (u Tensor) (v Tensor)) (= (attn_mix (concat 2 w u) v) (concat 2 (attn_mix w v) (attn_mix u v)))) :named attn-mix-concat-rows))
; value columns side by side give output columns side by side
(assert (! (forall ((w Tensor) (v Tensor) (z Tensor)) (= (attn_mix w (concat 3 v z)) (concat 3 (attn_mix w v) (attn_mix w z)))) :named attn-mix-concat-cols))

; Batch normalisation in training, without its affine: each channel
; normalised over its batch and image. Its layouts are in
; rules/batchnorm.go: channels cut, and copies, only.

; channels cut give the normalisation's channels cut: each channel is normalised on its own
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (batchnorm (partition 1 d x)) (partition 1 d (batchnorm x))))) :named batchnorm-partition-channels))
; the normalisation of a replicated tensor is the replicated normalisation
(assert (! (forall ((d Int) (x Tensor)) (=> (>= d 1) (= (batchnorm (replicate d x)) (replicate d (batchnorm x))))) :named batchnorm-replicate))
; channels side by side are normalised side by side
(assert (! (forall ((x Tensor) (y Tensor)) (= (batchnorm (concat 1 x y)) (concat 1 (batchnorm x) (batchnorm y)))) :named batchnorm-concat-channels))
; a channel's statistics are sums over its batch and image, so the order in which batches or images are put side by side does not change them
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (=> (or (= a 0) (= a 2) (= a 3)) (= (split0 a (batchnorm (concat a x y))) (split1 a (batchnorm (concat a y x)))))) :named batchnorm-concat-order))
; nor whether they are put side by side as batches or as image rows or columns
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (=> (or (= a 2) (= a 3)) (= (split0 0 (batchnorm (concat 0 x y))) (split0 a (batchnorm (concat a x y)))))) :named batchnorm-concat-axes))
; and the same for the second of the two
(assert (! (forall ((a Int) (x Tensor) (y Tensor)) (=> (or (= a 2) (= a 3)) (= (split1 0 (batchnorm (concat 0 x y))) (split1 a (batchnorm (concat a x y)))))) :named batchnorm-concat-axes-second))
; a normalised tensor normalised again is scaled per channel (per head, as attention reads it), and a product batched over heads takes a head's scale from either operand
(assert (! (forall ((x Tensor)) (= (attn_mix (batchnorm x) (batchnorm (batchnorm x))) (attn_mix (batchnorm (batchnorm x)) (batchnorm x)))) :named batchnorm-again-mix))
; and so do attention's scores, a product too
(assert (! (forall ((x Tensor)) (= (attn_softmax (batchnorm x) (batchnorm (batchnorm x))) (attn_softmax (batchnorm (batchnorm x)) (batchnorm x)))) :named batchnorm-again-scores))
; attention's weights sum to one along each row, so centring either operand of scores between two weight tensors takes the same constant off every score
(assert (! (forall ((q Tensor) (k Tensor)) (= (attn_softmax (attn_softmax q k) (batchnorm (attn_softmax q k))) (attn_softmax (batchnorm (attn_softmax q k)) (attn_softmax q k)))) :named attn-weights-centred))
