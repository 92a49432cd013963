package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// TestCacheKey: the key depends on everything that changes NVRTC's output
// and on nothing else, and is stable across releases of this code (a
// changed key only costs a recompilation, but it should be deliberate).
func TestCacheKey(t *testing.T) {
	opts := []string{"--gpu-architecture=compute_90"}
	k := cacheKey("src", opts, "12.4", "ptx")
	if k != cacheKey("src", []string{"--gpu-architecture=compute_90"}, "12.4", "ptx") {
		t.Error("the same inputs give different keys")
	}
	const golden = "7750a0bddd88a3c6b0991751ae0d42e398610f218ef9f322bc0a9df242752b3e"
	if k != golden {
		t.Errorf("cacheKey changed: %s, was %s", k, golden)
	}
	for name, other := range map[string]string{
		"source":  cacheKey("src ", opts, "12.4", "ptx"),
		"options": cacheKey("src", []string{"--gpu-architecture=compute_80"}, "12.4", "ptx"),
		"version": cacheKey("src", opts, "12.5", "ptx"),
		"kind":    cacheKey("src", opts, "12.4", "cubin"),
		"split":   cacheKey("src--gpu-architecture=compute_90", nil, "12.4", "ptx"),
		"none":    cacheKey("src", append(opts, ""), "12.4", "ptx"),
	} {
		if other == k {
			t.Errorf("a different %s gives the same key", name)
		}
	}
	keys := map[string]string{}
	for _, src := range Sources() {
		key := cacheKey(src.Code, opts, "12.4", "ptx")
		if other, dup := keys[key]; dup {
			t.Errorf("sources %s and %s share a key", src.Name, other)
		}
		keys[key] = src.Name
	}
}

func TestPTXCache(t *testing.T) {
	c := ptxCache{dir: filepath.Join(t.TempDir(), "rulebook", "ptx")}
	key := cacheKey("src", nil, "12.4", "ptx")
	if c.load(key, "ptx") != nil {
		t.Fatal("an empty cache returned data")
	}
	data := []byte(".version 8.4\n.target sm_90\n\x00")
	if err := c.store(key, "ptx", data); err != nil {
		t.Fatal(err)
	}
	if got := c.load(key, "ptx"); !bytes.Equal(got, data) {
		t.Fatalf("load = %q, want %q", got, data)
	}
	if got := c.load(key, "cubin"); got != nil {
		t.Error("the PTX answered for the CUBIN")
	}
	// Concurrent writers of one key: every reader sees a whole file.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := c.store(key, "ptx", data); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if got := c.load(key, "ptx"); got != nil && !bytes.Equal(got, data) {
				t.Errorf("a reader saw %q", got)
			}
		}()
	}
	wg.Wait()
	if left := c.leftovers(); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	entries, _ := os.ReadDir(c.dir)
	if len(entries) != 1 || entries[0].Name() != key+".ptx" {
		t.Errorf("cache holds %v, want only %s.ptx", entries, key)
	}
	c.drop(key, "ptx")
	if c.load(key, "ptx") != nil {
		t.Error("drop left the file")
	}
	// A failing write leaves nothing behind and says so.
	ro := ptxCache{dir: filepath.Join(t.TempDir(), "ro")}
	if err := os.MkdirAll(ro.dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if err := ro.store(key, "ptx", data); err == nil {
			t.Error("storing into a read-only directory succeeded")
		}
		if left := ro.leftovers(); len(left) != 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
	// Disabled cache.
	var off ptxCache
	if err := off.store(key, "ptx", data); err != nil || off.load(key, "ptx") != nil {
		t.Error("a disabled cache stored something")
	}
}

func TestDefaultCacheDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("XDG_CACHE_HOME is the Linux convention")
	}
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-test")
	t.Setenv("HOME", "/tmp/home-test")
	if got, want := defaultPTXCache().dir, "/tmp/xdg-test/rulebook/ptx"; got != want {
		t.Errorf("cache dir %s, want %s", got, want)
	}
}
