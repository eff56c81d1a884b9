// Package redistest starts a real redis-server for tests: on a free loopback
// port, in a temporary directory, with persistence off, and stops it again.
// It deliberately has no in-memory stand-in: tests talk to the server the
// operator talks to in production.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
)

// InstallHint says how to get the server binary on Debian.
const InstallHint = "redis-server not found in PATH: install it (apt-get install redis-server)"

const (
	startAttempts = 5
	readyTimeout  = 10 * time.Second
	stopTimeout   = 5 * time.Second
)

// Server is a running redis-server process.
type Server struct {
	// Addr is the server's host:port on the loopback interface.
	Addr string

	dir     string
	ownsDir bool
	// durable servers keep their data in an append-only file synced on
	// every write, so a killed server comes back with what it acknowledged.
	durable bool
	proc    *process
	// args are the server's arguments, for Restart.
	args []string
}

// process is one run of redis-server.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited is closed
}

// New starts a server for the test and stops it when the test ends. It fails
// the test, saying how to install redis-server, when the binary is missing.
func New(t testing.TB) *Server { return newForTest(t, false, false) }

// newForTest starts a server for the test and stops it when the test ends.
func newForTest(t testing.TB, cluster, durable bool) *Server {
	t.Helper()
	s, err := startWith(t.TempDir(), cluster, durable)
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping redis-server: %v", err)
		}
	})
	return s
}

// Shared is one server for a test package, started by the first test
// that asks for it (Get): the package's tests that never touch Redis run
// without redis-server. Use it as
//
//	var server = redistest.NewShared()
//	func TestMain(m *testing.M) { os.Exit(server.Main(m)) }
type Shared struct {
	suite *suite.Suite
	srv   *Server
}

// NewShared returns a Shared whose server is not started yet.
func NewShared() *Shared {
	s := &Shared{}
	s.suite = suite.New(func(onStop func(func() error)) error {
		srv, err := Start("")
		if err != nil {
			return err
		}
		s.srv = srv
		onStop(srv.Stop)
		return nil
	})
	return s
}

// Get returns the package's server, starting it first if no test has; it
// fails t when redis-server cannot be started.
func (s *Shared) Get(t testing.TB) *Server {
	t.Helper()
	s.suite.Use(t)
	return s.srv
}

// Client returns a new client of the package's server, closed when t
// ends.
func (s *Shared) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := s.Get(t).Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Main runs the tests and stops the server if one was started.
func (s *Shared) Main(m *testing.M) int { return s.suite.Main(m) }

// NewCluster starts a one-node Redis Cluster (cluster mode on, every slot
// assigned to the node) for the test, so code can be tested with a real
// ClusterClient, including cross-slot rules.
func NewCluster(t testing.TB) *Server { return newForTest(t, true, false) }

// NewDurable starts a server for the test that persists every write
// (appendonly, appendfsync always): Kill and Restart then show what a
// crash leaves behind.
func NewDurable(t testing.TB) *Server { return newForTest(t, false, true) }

// Start starts a server whose files live in dir; an empty dir means a new
// temporary directory, removed by Stop. Use it from TestMain to share one
// server per test package.
func Start(dir string) (*Server, error) { return start(dir, false) }

func start(dir string, cluster bool) (*Server, error) { return startWith(dir, cluster, false) }

func startWith(dir string, cluster, durable bool) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New(InstallHint)
	}
	ownsDir := false
	if dir != "" {
		// redis-server changes into --dir before it opens its log file.
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "redistest-"); err != nil {
			return nil, err
		}
		ownsDir = true
	}
	var lastErr error
	// Another process may take the free port between probing and binding;
	// try again with a new one.
	for range startAttempts {
		s, err := startOnce(bin, dir, cluster, durable)
		if err == nil {
			s.ownsDir = ownsDir
			return s, nil
		}
		lastErr = err
	}
	if ownsDir {
		_ = os.RemoveAll(dir)
	}
	return nil, lastErr
}

func startOnce(bin, dir string, cluster, durable bool) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s, err := startOnPort(bin, dir, port, cluster, durable)
	if err != nil || !cluster {
		return s, err
	}
	if err := s.assignAllSlots(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// startOnPort starts redis-server on port with the package's settings
// (loopback, no snapshots, append-only when durable) and extra arguments.
func startOnPort(bin, dir string, port int, cluster, durable bool, extra ...string) (*Server, error) {
	logFile := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log")
	appendOnly := "no"
	if durable {
		appendOnly = "yes"
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", logFile,
		"--save", "",
		"--appendonly", appendOnly,
		"--appendfsync", "always",
		"--daemonize", "no",
	}
	if cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf")
	}
	return launch(bin, dir, port, durable, append(args, extra...)...)
}

// launch runs bin with args, on port, logging into dir, and waits until
// it answers.
func launch(bin, dir string, port int, durable bool, args ...string) (*Server, error) {
	logFile := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log")
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	proc := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		proc.waitErr = cmd.Wait()
		close(proc.exited)
	}()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, durable: durable, proc: proc, args: args}
	if err := s.waitReady(); err != nil {
		_ = s.Stop()
		log, _ := os.ReadFile(logFile)
		return nil, fmt.Errorf("redis-server on %s did not become ready: %w; log:\n%s", s.Addr, err, log)
	}
	return s, nil
}

func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	for {
		select {
		case <-s.proc.exited:
			return fmt.Errorf("process exited: %v", s.proc.waitErr)
		default:
		}
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts a new server on the same address after Stop or Kill:
// empty, as a Redis without persistence comes back after a crash, or, for
// a durable server, with what its append-only file holds.
func (s *Server) Restart() error {
	if !s.Exited() {
		return errors.New("redis-server is still running: Stop it first")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errors.New(InstallHint)
	}
	if mkdirAllErr := os.MkdirAll(s.dir, 0o755); mkdirAllErr != nil {
		return mkdirAllErr
	}
	_, portStr, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(portStr)
	next, err := launch(bin, s.dir, port, s.durable, s.args...)
	if err != nil {
		return err
	}
	s.proc = next.proc
	return nil
}

// assignAllSlots makes the node own every slot and waits for the cluster
// to report ok.
func (s *Server) assignAllSlots() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		return fmt.Errorf("assigning slots: %w", err)
	}
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster did not become ok: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns a new client connected to the server.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// CountingClient returns a new client connected to the server and the
// count of bytes it has read from it, for tests that measure traffic.
func (s *Server) CountingClient() (*redis.Client, *atomic.Int64) {
	n := &atomic.Int64{}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, n: n}, nil
	}})
	return c, n
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(int64(k))
	return k, err
}

// Stop terminates the server and waits for it to exit; it is safe to call
// more than once.
func (s *Server) Stop() error {
	select {
	case <-s.proc.exited:
	default:
		_ = s.proc.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.proc.exited:
		case <-time.After(stopTimeout):
			_ = s.proc.cmd.Process.Kill()
			<-s.proc.exited
		}
	}
	if s.ownsDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// Kill ends the server with SIGKILL, as a crash or an OOM kill would, and
// waits for it to be gone.
func (s *Server) Kill() error {
	if err := s.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil && !s.Exited() {
		return err
	}
	<-s.proc.exited
	return nil
}

// Exited reports whether the server process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.proc.exited:
		return true
	default:
		return false
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BeforeEach is a go-redis hook that calls Run before each command named
// Name (lowercase, as redis.Cmder.Name gives it) with how many there were
// so far, for a test to change the server between a reader's commands.
type BeforeEach struct {
	Name string
	Run  func(n int)
	// N counts the commands seen.
	N int
}

// DialHook, ProcessPipelineHook and ProcessHook make BeforeEach a redis.Hook.
func (*BeforeEach) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*BeforeEach) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (b *BeforeEach) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == b.Name {
			b.N++
			b.Run(b.N)
		}
		return next(ctx, cmd)
	}
}
