package chaos

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiProxy stands between one manager and the apiserver and records every
// request the manager sends: when, which method, what came back. The
// manager's own metrics cannot tell what it does while it cannot reach
// the apiserver (it exits and restarts when it loses its Lease, and a
// process that is starting serves no metrics); the proxy counts every
// attempt, answered or not, and attributes writes to the manager that made
// them. The manager talks plain HTTP to it with its impersonation headers;
// the proxy forwards them over the cluster admin's TLS connection, so the
// apiserver authorizes each request as the manager's ServiceAccount.
type apiProxy struct {
	server   *http.Server
	listener net.Listener

	mu       sync.Mutex
	requests []proxied
}

// proxied is one request the manager sent.
type proxied struct {
	at    time.Time
	code  int // 502 when the apiserver did not answer
	write bool
	lease bool
}

func newAPIProxy(adminKubeconfig string) (*apiProxy, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &apiProxy{listener: l}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport: transport,
		// Watches stream: pass every event on as it comes.
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
			at := time.Now()
			rp.ServeHTTP(rec, r)
			p.record(proxied{at: at, code: rec.code,
				write: r.Method != http.MethodGet && r.Method != http.MethodHead,
				lease: strings.Contains(r.URL.Path, "/leases/")})
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

type statusRecorder struct {
	http.ResponseWriter
	code    int
	written bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.written {
		s.code, s.written = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

// Flush lets the reverse proxy stream watch events through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *apiProxy) record(r proxied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, r)
}

// writeKubeconfig writes a kubeconfig that reaches the apiserver through
// the proxy as the given ServiceAccount.
func (p *apiProxy) writeKubeconfig(path, namespace, serviceAccount string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + p.listener.Addr().String()}
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{
		Impersonate:       "system:serviceaccount:" + namespace + ":" + serviceAccount,
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "manager"}
	cfg.CurrentContext = "manager"
	return clientcmd.WriteToFile(*cfg, path)
}

func (p *apiProxy) close() { _ = p.server.Close() }

// count is how many requests started in [from, to] and match.
func (p *apiProxy) count(from, to time.Time, match func(proxied) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if !r.at.Before(from) && !r.at.After(to) && (match == nil || match(r)) {
			n++
		}
	}
	return n
}

// rate is the mean and the highest one-second rate of requests in
// [from, to].
func (p *apiProxy) rate(from, to time.Time) (mean, peak float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var at []time.Time
	for _, r := range p.requests {
		if !r.at.Before(from) && !r.at.After(to) {
			at = append(at, r.at)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	if secs := to.Sub(from).Seconds(); secs > 0 {
		mean = float64(len(at)) / secs
	}
	// The most requests in any one-second window.
	j := 0
	for i := range at {
		for at[i].Sub(at[j]) > time.Second {
			j++
		}
		peak = max(peak, float64(i-j+1))
	}
	return mean, peak
}
