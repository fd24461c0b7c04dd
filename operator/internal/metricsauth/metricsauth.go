// Package metricsauth guards the manager's HTTPS metrics endpoint as the
// apiserver guards its own: a request must carry a bearer token that the
// apiserver accepts (a TokenReview), for a user the apiserver allows to get
// that path (a SubjectAccessReview on the non-resource URL; the shipped
// metrics-reader ClusterRole grants `get` on /metrics).
//
// It does what controller-runtime's pkg/metrics/filters does, with the same
// answers (401 without a valid token, 403 when not allowed) and the same
// cache lifetimes, on client-go alone. That package builds
// k8s.io/apiserver's delegating authenticator and authorizer for these two
// API calls, and they link the apiserver's CEL, gRPC and OpenTelemetry
// packages into the manager: 13 MiB of its resident memory at idle (47 MiB
// with it, 34 MiB without), measured for docs/performance.md.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long answers are reused, as controller-runtime's filter reuses them:
// a scrape every 15-30 s then costs the apiserver nothing most of the time,
// and a revoked binding stops working within the allow lifetime.
const (
	authenticatedTTL   = time.Minute
	unauthenticatedTTL = 10 * time.Second
	allowedTTL         = 5 * time.Minute
	deniedTTL          = 30 * time.Second
	reviewTimeout      = 10 * time.Second
	// maxCached bounds each cache; past it, expired answers are dropped and,
	// if that is not enough, all of them (callers are a handful of scrapers).
	maxCached = 1024
)

// WithAuthenticationAndAuthorization is a metricsserver.Options
// FilterProvider.
func WithAuthenticationAndAuthorization(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, err
		}
	}
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	g := &guard{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now,
		users: newTTLCache[authenticationv1.UserInfo](), decisions: newTTLCache[bool]()}
	return g.filter, nil
}

type guard struct {
	tokens    authenticationclient.TokenReviewInterface
	access    authorizationclient.SubjectAccessReviewInterface
	users     *ttlCache[authenticationv1.UserInfo] // by token hash; the zero UserInfo is "not authenticated"
	decisions *ttlCache[bool]                      // by user, groups, verb and path
	now       func() time.Time
}

func (g *guard) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := g.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user.Username == "" {
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := g.authorize(req.Context(), user, verb, req.URL.Path)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(msg, "verb", verb, "path", req.URL.Path)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// authenticate returns the token's user; the zero UserInfo when the
// apiserver does not accept the token.
func (g *guard) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(token))) // never keep the token itself
	if user, ok := g.users.get(key, g.now()); ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("token review: %w", err)
	}
	if !review.Status.Authenticated || review.Status.User.Username == "" {
		g.users.put(key, authenticationv1.UserInfo{}, g.now(), unauthenticatedTTL)
		return authenticationv1.UserInfo{}, nil
	}
	g.users.put(key, review.Status.User, g.now(), authenticatedTTL)
	return review.Status.User, nil
}

// authorize asks whether user may use verb on the non-resource path.
func (g *guard) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	key := strings.Join([]string{user.Username, user.UID, strings.Join(groups, ","), verb, path}, "\x00")
	if allowed, ok := g.decisions.get(key, g.now()); ok {
		return allowed, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := deniedTTL
	if allowed {
		ttl = allowedTTL
	}
	g.decisions.put(key, allowed, g.now(), ttl)
	return allowed, nil
}

// ttlCache is a small map of answers with expiry times.
type ttlCache[V any] struct {
	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any]() *ttlCache[V] { return &ttlCache[V]{entries: map[string]ttlEntry[V]{}} }

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[V]) put(key string, value V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCached {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCached {
			clear(c.entries)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
