package load

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a controller's Prometheus endpoint: its own
// view of the requests it sent (client-go's rest_client_requests_total)
// and the reconciles it ran (controller-runtime's counters).
type Metrics map[string]*dto.MetricFamily

// Scrape reads url (http://host:port/metrics).
func Scrape(url string) (Metrics, error) { return ScrapeWith(http.DefaultClient, url) }

// ScrapeWith reads url with c: kube-apiserver's /metrics wants the
// kubeconfig's credentials (rest.HTTPClientFor).
func ScrapeWith(c *http.Client, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Requests are requests to the apiserver by HTTP method, or by any other
// label of rest_client_requests_total.
type Requests map[string]float64

// Total of all requests.
func (r Requests) Total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// Writes are the mutating requests (POST, PUT, PATCH, DELETE), of a
// Requests keyed by method.
func (r Requests) Writes() float64 {
	return r["POST"] + r["PUT"] + r["PATCH"] + r["DELETE"]
}

// Minus is r - before, key by key.
func (r Requests) Minus(before Requests) Requests {
	out := Requests{}
	for k, v := range r {
		out[k] = v - before[k]
	}
	return out
}

// Requests counts rest_client_requests_total by method.
func (m Metrics) Requests() Requests { return m.RequestsBy("method") }

// RequestsBy counts rest_client_requests_total by one of its labels
// (method, code: "429", "<error>" for requests that got no response).
func (m Metrics) RequestsBy(labelName string) Requests {
	return m.CounterBy("rest_client_requests_total", labelName)
}

// CounterBy adds up a counter family by one of its labels.
func (m Metrics) CounterBy(name, labelName string) Requests {
	out := Requests{}
	if f := m[name]; f != nil {
		for _, s := range f.GetMetric() {
			out[Label(s, labelName)] += s.GetCounter().GetValue()
		}
	}
	return out
}

// Sum adds up a counter or gauge family over its series that carry the
// given labels.
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	var n float64
	f := m[name]
	if f == nil {
		return 0
	}
next:
	for _, s := range f.GetMetric() {
		for k, v := range labels {
			if Label(s, k) != v {
				continue next
			}
		}
		switch {
		case s.GetCounter() != nil:
			n += s.GetCounter().GetValue()
		case s.GetGauge() != nil:
			n += s.GetGauge().GetValue()
		}
	}
	return n
}

// Reconciles is how many reconciles the memcached controller has finished.
func (m Metrics) Reconciles() float64 {
	return m.Sum("controller_runtime_reconcile_total", map[string]string{"controller": "memcached"})
}

// Label is the value of a series' label, "" when it has none.
func Label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
