// Package chart tests the Helm chart in ../helm/jetstream-bridge: helm
// lint and helm template of the pinned helm (this module's go.mod), every
// rendered object decoded strictly into the Kubernetes API types, and
// the bridge's container args parsed by the bridge's own flag parser.
package chart

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/jetstream-bridge/bridge/daemon"
	"github.com/jetstream-bridge/bridge/deploy/image"
	"github.com/jetstream-bridge/bridge/internal/runflags"
)

const (
	chartDir = "../helm/jetstream-bridge"
	release  = "rel"
	podName  = "rel-jetstream-bridge-7d9f8b6c5d-x2k4q"
)

// helmBin is helm built from the version this module pins.
var helmBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "helm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helmBin = filepath.Join(dir, "helm")
	build := exec.Command("go", "build", "-o", helmBin, "helm.sh/helm/v3/cmd/helm")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building helm:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helm runs the pinned helm with a home of its own, so no user's
// repositories or plugins take part.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// rendered is what helm template made of one set of values.
type rendered struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	secrets        []*corev1.Secret
	serviceAccount *corev1.ServiceAccount
	pvc            *corev1.PersistentVolumeClaim
	serviceMonitor *monitoringv1.ServiceMonitor
}

// render lints the chart with values (--strict: a warning fails it too),
// templates it and decodes every object strictly: a field the API type
// does not have fails the test, as the API server would refuse it.
func render(t *testing.T, values ...string) *rendered {
	t.Helper()
	var set []string
	for _, v := range values {
		set = append(set, "--set", v)
	}
	if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, set...)...); err != nil {
		t.Fatalf("helm lint: %v", err)
	} else if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", "bridges"}, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{}
	for doc := range strings.SplitSeq(out, "\n---") {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			obj = slot(t, &r.deployment)
		case "v1 Service":
			obj = slot(t, &r.service)
		case "policy/v1 PodDisruptionBudget":
			obj = slot(t, &r.pdb)
		case "v1 ServiceAccount":
			obj = slot(t, &r.serviceAccount)
		case "v1 PersistentVolumeClaim":
			obj = slot(t, &r.pvc)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			obj = slot(t, &r.serviceMonitor)
		case "v1 Secret":
			r.secrets = append(r.secrets, &corev1.Secret{})
			obj = r.secrets[len(r.secrets)-1]
		default:
			t.Fatalf("the chart renders %s %s, which this test does not decode", meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s does not decode strictly into its API type: %v\n%s", meta.Kind, err, doc)
		}
	}
	if r.deployment == nil || r.service == nil {
		t.Fatalf("no Deployment or Service rendered:\n%s", out)
	}
	return r
}

// slot sets *p to a new T to decode into, failing when the chart
// rendered one already.
func slot[T any](t *testing.T, p **T) *T {
	t.Helper()
	if *p != nil {
		t.Fatalf("the chart renders two %T", *p)
	}
	*p = new(T)
	return *p
}

// bridge is the Deployment's bridge container.
func (r *rendered) bridge(t *testing.T) corev1.Container {
	t.Helper()
	cs := r.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the pod has %d containers, want the bridge alone", len(cs))
	}
	return cs[0]
}

var placeholder = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// parseArgs gives the container's args to `bridge run`'s own flag
// parser, in the environment the pod would have: $(VAR) expanded as the
// kubelet expands it, the downward API's pod name, a stand-in for each
// Secret's value. It returns the daemon's configuration, checked as
// `bridge run` checks it before it starts anything.
func parseArgs(t *testing.T, c corev1.Container) (daemon.Config, error) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, runflags.EnvPrefix) || name == "NATS_URL" {
			t.Setenv(name, "")
		}
	}
	fs, s := runflags.New(io.Discard)
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch src := e.ValueFrom; {
		case src == nil:
		case src.FieldRef != nil && src.FieldRef.FieldPath == "metadata.name":
			v = podName
		case src.FieldRef != nil:
			t.Fatalf("env %s from field %s, which this test does not stand in for", e.Name, src.FieldRef.FieldPath)
		case src.SecretKeyRef != nil && e.Name == runflags.EnvName("nats-url"):
			v = "nats://nats-0.nats:4222,nats://nats-1.nats:4222,nats://nats-2.nats:4222"
		case src.SecretKeyRef != nil:
			v = "secret " + src.SecretKeyRef.Name + "/" + src.SecretKeyRef.Key
		case src.ResourceFieldRef != nil:
			v = "536870912"
		}
		env[e.Name] = v
		if name, ok := strings.CutPrefix(e.Name, runflags.EnvPrefix); ok {
			flagName := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
			if fs.Lookup(flagName) == nil {
				t.Errorf("env %s names no flag of bridge run (there is no --%s)", e.Name, flagName)
			}
			t.Setenv(e.Name, v)
		}
	}
	if len(c.Command) != 0 {
		t.Errorf("the container sets command %q: the image's entrypoint is %s", c.Command, image.Binary)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("container args %q, want them to start with the subcommand run", c.Args)
	}
	var args []string
	for _, a := range c.Args[1:] {
		args = append(args, placeholder.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m // the kubelet leaves a reference it cannot resolve as it is
		}))
	}
	if err := runflags.Parse(fs, args); err != nil {
		return daemon.Config{}, fmt.Errorf("bridge run %q: %w", args, err)
	}
	if fs.NArg() > 0 {
		return daemon.Config{}, fmt.Errorf("bridge run: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := s.Config(io.Discard, "test")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return cfg, fmt.Errorf("bridge run %q: %s", args, runflags.Message(err))
	}
	return cfg, nil
}

// The defaults: a cluster of two bridges on the user's NATS.
func TestDefaultValues(t *testing.T) {
	r := render(t)
	cfg := checkCommon(t, r)
	if *r.deployment.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *r.deployment.Spec.Replicas)
	}
	checkCluster(t, r, cfg, 10*time.Second)
	if cfg.NATSURL != "nats://nats.nats.svc.cluster.local:4222" || cfg.NATSCreds != "" {
		t.Errorf("NATS %q creds %q, want the NATS chart's service and no credentials", cfg.NATSURL, cfg.NATSCreds)
	}
	if r.serviceMonitor != nil {
		t.Error("a ServiceMonitor rendered while serviceMonitor.enabled is false")
	}
}

// Three bridges, their NATS URL and credentials from a Secret, a longer
// lease, a ServiceMonitor.
func TestThreeReplicaCluster(t *testing.T) {
	r := render(t, "replicaCount=3", "nats.existingSecret=bridge-nats", "leaseTTL=15s",
		"serviceMonitor.enabled=true", "adminToken.existingSecret=bridge-admin", "adminToken.key=admin")
	cfg := checkCommon(t, r)
	if *r.deployment.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *r.deployment.Spec.Replicas)
	}
	checkCluster(t, r, cfg, 15*time.Second)
	c := r.bridge(t)
	if !strings.HasPrefix(cfg.NATSURL, "nats://nats-0") {
		t.Errorf("--nats-url %q, want the Secret's", cfg.NATSURL)
	}
	urlRef := envRef(c, runflags.EnvName("nats-url"))
	if urlRef == nil || urlRef.Name != "bridge-nats" || urlRef.Key != "url" {
		t.Errorf("NATS URL from %+v, want the Secret bridge-nats, key url", urlRef)
	}
	mount := mountAt(c, filepath.Dir(cfg.NATSCreds))
	if cfg.NATSCreds == "" || mount == nil || !mount.ReadOnly {
		t.Fatalf("--nats-creds %q, mounted %+v: want a file of a read-only mount", cfg.NATSCreds, mount)
	}
	vol := volume(r, mount.Name)
	if vol.Secret == nil || vol.Secret.SecretName != "bridge-nats" || len(vol.Secret.Items) != 1 ||
		vol.Secret.Items[0].Key != "creds" || vol.Secret.Items[0].Path != filepath.Base(cfg.NATSCreds) {
		t.Errorf("credentials volume %+v, want key creds of Secret bridge-nats at %s", vol.VolumeSource, cfg.NATSCreds)
	}
	if ref := envRef(c, runflags.EnvName("admin-token")); ref == nil || ref.Name != "bridge-admin" || ref.Key != "admin" {
		t.Errorf("admin token from %+v, want the user's Secret bridge-admin, key admin", ref)
	}
	if len(r.secrets) != 0 {
		t.Errorf("the chart made %d Secrets beside the user's", len(r.secrets))
	}
	sm := r.serviceMonitor
	if sm == nil {
		t.Fatal("no ServiceMonitor with serviceMonitor.enabled")
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on the port admin", sm.Spec.Endpoints)
	}
	if !selects(sm.Spec.Selector.MatchLabels, r.service.Labels) {
		t.Errorf("ServiceMonitor selects %v, the Service has labels %v", sm.Spec.Selector.MatchLabels, r.service.Labels)
	}
}

// The single-replica embedded mode: one bridge, its own NATS, the
// journal kept on a volume claim.
func TestEmbeddedMode(t *testing.T) {
	r := render(t, "embedded.enabled=true", "embedded.persistence.enabled=true", "replicaCount=3")
	cfg := checkCommon(t, r)
	d := r.deployment
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s: the embedded mode is one bridge, replaced by Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if cfg.Store != "bolt" || cfg.NATSURL != "" {
		t.Errorf("store %q NATS %q, want bolt on the embedded server", cfg.Store, cfg.NATSURL)
	}
	if !strings.HasPrefix(cfg.EmbeddedListen, ":") || !hasPort(r.bridge(t), "nats", cfg.EmbeddedListen) || !hasServicePort(r.service, "nats") {
		t.Errorf("--embedded-listen %q: want it on every address, a container port and a Service port named nats", cfg.EmbeddedListen)
	}
	if r.pvc == nil || volume(r, "data").PersistentVolumeClaim == nil || volume(r, "data").PersistentVolumeClaim.ClaimName != r.pvc.Name {
		t.Errorf("the data volume %+v is not the chart's claim", volume(r, "data").VolumeSource)
	}
}

// A flag the chart passes that `bridge run` does not know, or a value it
// refuses, fails here as it would fail the pod.
func TestUnknownFlagFails(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"extraArgs[0]=--no-such-flag", "flag provided but not defined: -no-such-flag"},
		{"leaseTTL=500ms", "--lease-ttl"},
	} {
		r := render(t, tc.set)
		_, err := parseArgs(t, r.bridge(t))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
}

// checkCommon checks what every mode shares and returns the parsed
// configuration.
func checkCommon(t *testing.T, r *rendered) daemon.Config {
	t.Helper()
	c := r.bridge(t)
	cfg, err := parseArgs(t, c)
	if err != nil {
		t.Fatal(err)
	}
	// The image's promises: its user, its data directory.
	pod := r.deployment.Spec.Template.Spec
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("no securityContext")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != image.UID || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod runs as %v (runAsNonRoot %v), want the image's user %d", psc.RunAsUser, psc.RunAsNonRoot, image.UID)
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want non-root, a read-only root filesystem, no privilege escalation, all capabilities dropped", sc)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %+v, want RuntimeDefault", psc.SeccompProfile)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token: the bridge never calls the Kubernetes API")
	}
	if m := mountAt(c, cfg.DataDir); cfg.DataDir != image.DataDir || m == nil {
		t.Errorf("--data-dir %q, mounted %v: want the image's %s on a volume (the root filesystem is read-only)", cfg.DataDir, m, image.DataDir)
	}
	// Probes on the admin port, which the Service exposes.
	if !hasPort(c, "admin", cfg.AdminListen) || !strings.HasPrefix(cfg.AdminListen, ":") {
		t.Errorf("--admin-listen %q: want every address and the container port named admin", cfg.AdminListen)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("admin") {
			t.Errorf("%s probe %+v, want GET %s on the port admin", p.name, p.probe, p.path)
		}
	}
	if !hasServicePort(r.service, "admin") || !selects(r.service.Spec.Selector, r.deployment.Spec.Template.Labels) {
		t.Errorf("Service %+v does not expose the port admin of the bridges", r.service.Spec)
	}
	if !selects(r.deployment.Spec.Selector.MatchLabels, r.deployment.Spec.Template.Labels) {
		t.Error("the Deployment's selector does not select its pods")
	}
	// The admin token, shared by every bridge, from a Secret.
	ref := envRef(c, runflags.EnvName("admin-token"))
	if ref == nil {
		t.Fatal("no admin token from a Secret")
	}
	if cfg.AdminToken == "" {
		t.Error("--admin-token empty: each bridge would generate its own")
	}
	for _, s := range r.secrets {
		if s.Name == ref.Name && len(s.Data[ref.Key]) < 32 {
			t.Errorf("the chart's admin token has %d bytes, want at least 32", len(s.Data[ref.Key]))
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want a CPU request and a memory limit", c.Resources)
	}
	if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil || *r.pdb.Spec.MaxUnavailable != intstr.FromInt32(1) ||
		!selects(r.pdb.Spec.Selector.MatchLabels, r.deployment.Spec.Template.Labels) {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1 over the bridges", r.pdb)
	}
	return cfg
}

// checkCluster checks the flags of a cluster of bridges.
func checkCluster(t *testing.T, r *rendered, cfg daemon.Config, ttl time.Duration) {
	t.Helper()
	c := r.bridge(t)
	if cfg.Store != "kv" || cfg.LeaseTTL != ttl || cfg.KVReplicas != 3 {
		t.Errorf("store %q lease TTL %v kv replicas %d, want kv, %v, 3", cfg.Store, cfg.LeaseTTL, cfg.KVReplicas, ttl)
	}
	if cfg.Instance != podName {
		t.Errorf("--instance %q, want the pod's name %q", cfg.Instance, podName)
	}
	var fromPod bool
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" &&
			slices.Contains(c.Args, "--instance=$("+e.Name+")") {
			fromPod = true
		}
	}
	if !fromPod {
		t.Error("--instance is not the pod's name from the downward API")
	}
	if cfg.CreateStream == nil || *cfg.CreateStream {
		t.Error("--create-stream is not false: the journal on the user's NATS is theirs to make")
	}
	d := r.deployment.Spec.Strategy
	if d.Type != appsv1.RollingUpdateDeploymentStrategyType || d.RollingUpdate == nil ||
		*d.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) || *d.RollingUpdate.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("strategy %+v, want a rolling update that starts a bridge before it stops one", d)
	}
	if g := r.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 20 {
		t.Errorf("terminationGracePeriodSeconds %v: SIGTERM's hand-over needs its 10 s for in-flight POSTs and the flush", g)
	}
}

func envRef(c corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

func mountAt(c corev1.Container, path string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if m.MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(r *rendered, name string) corev1.Volume {
	for _, v := range r.deployment.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	return corev1.Volume{}
}

// hasPort reports whether c has a port named name on the port of the
// listen address addr.
func hasPort(c corev1.Container, name, addr string) bool {
	for _, p := range c.Ports {
		if p.Name == name && strings.HasSuffix(addr, fmt.Sprintf(":%d", p.ContainerPort)) {
			return true
		}
	}
	return false
}

func hasServicePort(s *corev1.Service, name string) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == name && p.TargetPort == intstr.FromString(name) {
			return true
		}
	}
	return false
}

// selects reports whether the selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
