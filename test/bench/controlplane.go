package bench

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
)

// controlPlane reads what a measurement cost the control plane, from its
// own processes and metrics rather than from the client's side: the CPU
// time of kube-apiserver and etcd, the requests kube-apiserver served by
// verb (apiserver_request_total, so every client counts: the harness's
// creates of the CRs, the controller's reads, writes, lists and watches),
// and the bytes etcd appended to its write-ahead log
// (etcd_disk_wal_write_bytes_total), which every write pays whatever its
// verb.
type controlPlane struct {
	pids      []int
	apiserver *http.Client
	metrics   string // kube-apiserver's /metrics
	etcd      string // etcd's /metrics
}

func newControlPlane(k *cluster.Local, restCfg *rest.Config) (*controlPlane, error) {
	etcd, err := k.Cluster.EtcdURL()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		return nil, err
	}
	return &controlPlane{pids: k.PIDs(), apiserver: httpClient,
		metrics: strings.TrimSuffix(restCfg.Host, "/") + "/metrics", etcd: etcd + "/metrics"}, nil
}

// controlPlaneSample is the control plane's counters at one moment.
type controlPlaneSample struct {
	cpu      float64       // seconds, kube-apiserver + etcd
	served   load.Requests // by verb
	walBytes float64
}

func (cp *controlPlane) sample() (controlPlaneSample, error) {
	s := controlPlaneSample{cpu: clusterCPUSeconds(cp.pids)}
	apiserver, err := load.ScrapeWith(cp.apiserver, cp.metrics)
	if err != nil {
		return s, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	s.served = apiserver.CounterBy("apiserver_request_total", "verb")
	etcd, err := load.Scrape(cp.etcd)
	if err != nil {
		return s, fmt.Errorf("etcd metrics: %w", err)
	}
	s.walBytes = etcd.Sum("etcd_disk_wal_write_bytes_total", nil)
	return s, nil
}

// since sets m's control-plane figures to what was spent from start to now.
func (cp *controlPlane) since(start controlPlaneSample, m *Measurement) error {
	now, err := cp.sample()
	if err != nil {
		return err
	}
	m.ClusterCPU = now.cpu - start.cpu
	m.Served = map[string]float64{}
	for verb, count := range now.served.Minus(start.served) {
		if count > 0 {
			m.Served[verb] = count / float64(m.N)
		}
	}
	m.EtcdBytes = (now.walBytes - start.walBytes) / float64(m.N)
	return nil
}
