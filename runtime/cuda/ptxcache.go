package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ptxCache keeps NVRTC's output on disk, one file per source, options
// and NVRTC version: <dir>/<sha256>.ptx (or .cubin). An empty dir disables
// it. Files are written to a temporary name and renamed, so a reader never
// sees a partial file, and concurrent writers of the same key write the
// same bytes.
type ptxCache struct {
	dir string
}

// defaultPTXCache is os.UserCacheDir()/rulebook/ptx, or disabled when
// there is no user cache directory.
func defaultPTXCache() ptxCache {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		return ptxCache{}
	}
	return ptxCache{dir: filepath.Join(base, "rulebook", "ptx")}
}

// cacheKey identifies a compilation: the full source text, the options in
// order, the NVRTC version and the output kind. Each part is
// length-prefixed, so no two different inputs share a key.
func cacheKey(source string, options []string, nvrtcVersion string, kind string) string {
	h := sha256.New()
	for _, part := range append([]string{"rulebook-ptx-v1", kind, nvrtcVersion, source}, options...) {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c ptxCache) path(key, kind string) string {
	return filepath.Join(c.dir, key+"."+kind)
}

// load returns the cached image, or nil when there is none.
func (c ptxCache) load(key, kind string) []byte {
	if c.dir == "" {
		return nil
	}
	data, err := os.ReadFile(c.path(key, kind))
	if err != nil || len(data) == 0 {
		return nil
	}
	return data
}

// store writes an image atomically: a temporary file in the same
// directory, synced, then renamed over the final name.
func (c ptxCache) store(key, kind string, data []byte) error {
	if c.dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, ".tmp-"+key[:16]+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, c.path(key, kind))
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("cuda: caching %s: %w", c.path(key, kind), werr)
	}
	return nil
}

// drop removes a cached image that failed to load.
func (c ptxCache) drop(key, kind string) {
	if c.dir == "" {
		return
	}
	os.Remove(c.path(key, kind))
}

// leftovers lists temporary files a crashed writer may have left.
func (c ptxCache) leftovers() []string {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}
