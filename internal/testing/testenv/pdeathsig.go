package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// guardedBinaries are the control-plane binaries envtest starts.
var guardedBinaries = []string{"etcd", "kube-apiserver"}

// guardAssets returns a directory of launchers for the binaries in assets
// that give each process a parent-death signal (util-linux setpriv), so
// etcd and kube-apiserver die with the process that started them however it
// ends: SIGKILL, a panic, or a broken stdout. envtest starts them in their
// own process group, so a terminal's Ctrl-C alone does not reach them.
//
// Where setpriv is missing (not Linux), assets is returned as it is.
func guardAssets(assets string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return assets, nil
	}
	abs, err := filepath.Abs(assets)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs + "\x00" + setpriv))
	dir := filepath.Join(os.TempDir(), "toolcatalog-controlplane-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating launcher directory: %w", err)
	}
	for _, name := range guardedBinaries {
		script := fmt.Sprintf("#!/bin/sh\nexec %q --pdeathsig KILL -- %q \"$@\"\n", setpriv, filepath.Join(abs, name))
		if err := writeAtomic(filepath.Join(dir, name), []byte(script)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeAtomic replaces path with an executable file holding data. Several
// test binaries may start at once: a launcher is never executed while it is
// being written.
func writeAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".launcher-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(0o755); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
