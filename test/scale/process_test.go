package scale

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// process is a binary under measurement (the manager, the gateway): its
// CPU time and resident set are read from /proc.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	// highRSS is the highest resident set sampled (sampleRSS).
	highRSS atomic.Int64
	// reported says the peak was read for the table (memory).
	reported atomic.Bool
	// pprofAddr serves the process's profiles.
	pprofAddr string
}

// startProcess runs bin with args and env added to this process's, its
// standard error copied to stderr as well as this process's; the test's
// cleanup stops it with SIGTERM, and kills it 30s later.
func startProcess(t *testing.T, bin string, args, env []string, stderr io.Writer) *process {
	// Profiles are served always, on loopback: the bench attributes an
	// edit's CPU to components from one.
	pprofAddr := testenv.FreeAddr(t)
	args = append(args, "--pprof-bind-address="+pprofAddr)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(os.Stderr, stderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), pprofAddr: pprofAddr}
	go func() { _ = cmd.Wait(); close(p.done) }()
	go p.sampleRSS()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kubeconfigFile writes the API server's kubeconfig for a process.
func kubeconfigFile(t *testing.T) string {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// cpu is the process's user and system CPU time so far.
func (p *process) cpu(t *testing.T) time.Duration { return processCPU(t, p.cmd.Process.Pid) }

// processCPU is the CPU time process pid has used.
func processCPU(t *testing.T, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// the 14th and 15th fields, in clock ticks (100 per second on Linux).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// sampleRSS keeps the highest resident set read every rssEvery until the
// process exits: VmHWM alone can miss a peak, since Linux updates it
// lazily from counters kept per CPU.
func (p *process) sampleRSS() {
	for {
		select {
		case <-p.done:
			return
		case <-time.After(rssEvery):
		}
		_, _ = p.rss()
	}
}

const rssEvery = 250 * time.Millisecond

// rss reads the process's resident set now, and keeps it as the highest
// sampled when it is: every reading counts toward the reported peak, the
// peak profiler's too.
func (p *process) rss() (int64, error) {
	fields, err := p.status()
	rss := fields["VmRSS"]
	for err == nil {
		high := p.highRSS.Load()
		if rss <= high || p.highRSS.CompareAndSwap(high, rss) {
			break
		}
	}
	return rss, err
}

// memory reads the process's resident set from /proc/pid/status: the
// peak (the higher of VmHWM and the highest sampled) and, now, what is
// anonymous (heap, stacks) and what is file-backed (the binary's pages).
func (p *process) memory(t *testing.T) (peak, anon, file int64) {
	fields, err := p.status()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["VmHWM"]; !ok {
		t.Fatal("no VmHWM in /proc/pid/status")
	}
	// What comes after (a scenario's cleanup deleting every object at
	// once) is not of the figures reported: the peak profiler stops.
	p.reported.Store(true)
	return max(fields["VmHWM"], p.highRSS.Load()), fields["RssAnon"], fields["RssFile"]
}

// status reads the sizes in /proc/pid/status, in bytes.
func (p *process) status() (map[string]int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	fields := map[string]int64{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err == nil {
			fields[name] = kb * 1024
		}
	}
	return fields, nil
}

// pprof copies one of the process's /debug/pprof/ endpoints into path.
func (p *process) pprof(endpoint, path string) error {
	resp, err := http.Get("http://" + p.pprofAddr + "/debug/pprof/" + endpoint)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", endpoint, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// profile records profileDuration of the process's allocations into
// path; the returned function waits for it. Nothing without
// -scale.cpuprofile (the CPU profiles are each edit's, cpuProfile).
func (p *process) profile(t *testing.T, path string) func() {
	if *profileFlag == "" {
		return func() {}
	}
	start := time.Now()
	seconds := strconv.Itoa(int(profileDuration.Seconds()))
	done := make(chan error, 1)
	go func() { done <- p.pprof("allocs?seconds="+seconds, path) }()
	return func() {
		if err := <-done; err != nil {
			t.Errorf("allocation profile: %v", err)
			return
		}
		t.Logf("allocation profile of %v (the measured steps took %v): %s", profileDuration, time.Since(start).Round(time.Second), path)
	}
}

// cpuProfile records the process's CPU profile for the next seconds into
// path; wait returns once it is written.
func (p *process) cpuProfile(seconds int, path string) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- p.pprof("profile?seconds="+strconv.Itoa(seconds), path) }()
	return func() error { return <-done }
}

// heapProfile writes the process's heap profile, after a collection, into
// path. Nothing without -scale.heapprofile.
func (p *process) heapProfile(t *testing.T, path string) {
	if *heapFlag == "" {
		return
	}
	if err := p.pprof("heap?gc=1", path); err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	t.Logf("heap profile: %s", path)
}

// watchPeak writes the process's heap profile into path each time its
// resident set grows by peakStep past the highest seen, until the peak is
// reported (memory) or the test ends, so the profile is of the peak
// reported. Nothing without -scale.heapprofile.
func (p *process) watchPeak(t *testing.T, path string) {
	if *heapFlag == "" {
		return
	}
	stop := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(stop); <-stopped })
	go func() {
		defer close(stopped)
		var high int64
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-p.done:
				return
			case <-time.After(2 * time.Second):
			}
			if p.reported.Load() {
				return
			}
			rss, err := p.rss()
			if err != nil || rss < high+peakStep {
				continue
			}
			high = rss
			if err := p.pprof("heap", path); err != nil {
				t.Logf("heap profile at the peak: %v", err)
				continue
			}
			t.Logf("heap profile at %s resident, %v in: %s", mib(rss), time.Since(start).Round(time.Second), path)
		}
	}()
}

// peakStep is how far the resident set must grow past the highest seen
// for watchPeak to profile again.
const peakStep = 16 << 20

// editProfileSeconds is how long the CPU profile of one edit of a
// catalog of n tools records: longer than the edit takes until the
// manager is idle (well under a second at 1,000 tools, a few at 50,000).
func editProfileSeconds(n int) int { return 2 + n/2000 }

// profileDuration is how long an allocation profile records.
const profileDuration = 20 * time.Second
