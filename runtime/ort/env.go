// Package ort runs models through ONNX Runtime's CPU execution provider, as
// a second backend beside rulebook's own runtime. It takes the same loaded
// model (weights included, generated ones too), the same inputs and the same
// thread count, so outputs and timings compare directly. The library is
// loaded at run time, so nothing of it is needed to build.
// docs/runtime.md ("Other backends") tells the rest.
package ort

import (
	"fmt"
	"sync"

	onnxruntime "github.com/yalue/onnxruntime_go"

	"rulebook/internal/infile"
)

// APIVersion is the ONNX Runtime C API version the binding asks for
// (onnxruntime_go v1.27.0's header); a library serves its own version
// and every older one, so ONNX Runtime 1.24 and later will do.
const APIVersion = 24

// loaded is the library this process loaded. ONNX Runtime's environment
// is process-wide and the binding can load one library per process, so
// this one piece of state is global too; the mutex makes opening
// sessions from several goroutines safe.
var loaded struct {
	sync.Mutex
	path string
}

// Load loads the library at path and creates the process's ONNX Runtime
// environment, once; later calls with the same path do nothing, and a
// different path is refused.
func Load(path string) error {
	loaded.Lock()
	defer loaded.Unlock()
	if loaded.path == path {
		return nil
	}
	// dlopen maps the file as it is: a truncated library dies with SIGBUS
	// inside the loader, past any error handling, so check what can be
	// checked first.
	if err := infile.SharedObject(path); err != nil {
		return fmt.Errorf("ort: %w", err)
	}
	if loaded.path != "" {
		return fmt.Errorf("ort: the ONNX Runtime library is already loaded from %s in this process; cannot load %s too", loaded.path, path)
	}
	onnxruntime.SetSharedLibraryPath(path)
	if err := onnxruntime.InitializeEnvironment(onnxruntime.WithLogLevelError()); err != nil {
		return fmt.Errorf("ort: loading %s (the binding needs C API version %d, ONNX Runtime 1.%d or later): %w", path, APIVersion, APIVersion, err)
	}
	loaded.path = path
	return nil
}

// Version is the loaded library's version, e.g. "1.32.0"; "" before Load.
func Version() string {
	loaded.Lock()
	defer loaded.Unlock()
	if loaded.path == "" {
		return ""
	}
	return onnxruntime.GetVersion()
}
