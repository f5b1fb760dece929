//go:build linux && (amd64 || arm64 || loong64)

package cuda

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// TestLoaderWrongLibrary loads a library that is not the driver: the
// missing entry points are an ErrNoDriver error naming the symbol.
func TestLoaderWrongLibrary(t *testing.T) {
	_, err := loadFrom([]string{"libc.so.6"}, nil)
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cuInit") {
		t.Fatalf("loadFrom(libc): %v, want ErrNoDriver naming cuInit", err)
	}
}

// TestSignaturesRegister checks that purego accepts every signature in
// api (RegisterFunc panics on an unsupported type), binding each to some
// libc function that is never called.
func TestSignaturesRegister(t *testing.T) {
	lib, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc: %v", err)
	}
	addr, err := purego.Dlsym(lib, "abs")
	if err != nil {
		t.Skipf("no abs: %v", err)
	}
	var a api
	v := reflect.ValueOf(&a).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: RegisterFunc panicked: %v", name, r)
				}
			}()
			purego.RegisterFunc(v.Field(i).Addr().Interface(), addr)
		}()
		if v.Field(i).IsNil() {
			t.Errorf("%s not set", name)
		}
	}
}
