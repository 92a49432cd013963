package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchShapes are (M, N, K): ResNet-50 convolutions at batch 1 as im2col
// products C[M×N] = W[M×K]·col[K×N] (M output channels, K = Cin·kh·kw,
// N = Hout·Wout), BERT-base layers at sequence length 64, and a square.
var benchShapes = []struct {
	name    string
	m, n, k int
}{
	{"resnet_conv2_3x3", 64, 3136, 576},
	{"resnet_conv2_1x1up", 256, 3136, 64},
	{"resnet_conv3_3x3", 128, 784, 1152},
	{"resnet_conv3_1x1up", 512, 784, 128},
	{"resnet_conv4_3x3", 256, 196, 2304},
	{"resnet_conv4_1x1up", 1024, 196, 256},
	{"resnet_conv5_3x3", 512, 49, 4608},
	{"resnet_conv5_1x1up", 2048, 49, 512},
	{"resnet_conv1_7x7", 64, 12544, 147},
	{"bert_qkvo", 64, 768, 768},
	{"bert_ffn_up", 64, 3072, 768},
	{"bert_ffn_down", 64, 768, 3072},
	{"bert_attn", 64, 64, 64},
	{"square1024", 1024, 1024, 1024},
}

func benchOperands(m, n, k int) (a, b, c []float32) {
	rng := rand.New(rand.NewPCG(5, 5))
	return randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, m*n)
}

func reportGFLOPS(b *testing.B, m, n, k int) {
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
}

// BenchmarkSgemm runs every shape with our kernels on 1 and 2 threads
// (A·B, and A·Bᵀ as ONNX Gemm with transB=1 stores weights) and with
// gonum's Sgemm, which parallelizes itself over GOMAXPROCS.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range benchShapes {
		a, bb, c := benchOperands(s.m, s.n, s.k)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s_%dx%dx%d/ours_t%d", s.name, s.m, s.n, s.k, threads), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					SgemmParallel(threads, false, false, s.m, s.n, s.k, 1, a, s.k, bb, s.n, 0, c, s.n)
				}
				reportGFLOPS(b, s.m, s.n, s.k)
			})
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s_%dx%dx%d/oursNT_t%d", s.name, s.m, s.n, s.k, threads), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					SgemmParallel(threads, false, true, s.m, s.n, s.k, 1, a, s.k, bb, s.k, 0, c, s.n)
				}
				reportGFLOPS(b, s.m, s.n, s.k)
			})
		}
		b.Run(fmt.Sprintf("%s_%dx%dx%d/gonum", s.name, s.m, s.n, s.k), func(b *testing.B) {
			var impl gonum.Implementation
			for i := 0; i < b.N; i++ {
				impl.Sgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, 1, a, s.k, bb, s.n, 0, c, s.n)
			}
			reportGFLOPS(b, s.m, s.n, s.k)
		})
	}
}

// BenchmarkPackedA is the convolution path with weights packed once.
func BenchmarkPackedA(b *testing.B) {
	for _, s := range benchShapes {
		a, bb, c := benchOperands(s.m, s.n, s.k)
		pa := PackA(false, s.m, s.k, a, s.k)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s_%dx%dx%d/t%d", s.name, s.m, s.n, s.k, threads), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					SgemmPackedA(threads, pa, false, s.n, 1, bb, s.n, 0, c, s.n)
				}
				reportGFLOPS(b, s.m, s.n, s.k)
			})
		}
	}
}
