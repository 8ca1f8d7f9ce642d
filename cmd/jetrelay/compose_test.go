package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/jetrelay/jetrelay/internal/config"
)

// The reference events service's settings (cycles-server-admin's
// docker-compose.full-stack.prod.yml, service cycles-events): a drop-in
// keeps every one of them.
var referenceEventsEnv = []string{"REDIS_HOST", "REDIS_PORT", "REDIS_PASSWORD", "MANAGEMENT_PORT", "WEBHOOK_SECRET_ENCRYPTION_KEY", "WEBHOOK_SECRET_ALLOW_PLAINTEXT"}

// composeFile and composeService are the Compose keys the files use,
// decoded strictly: a misspelt key fails the test instead of being ignored
// by Compose.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions are the x- keys the file's anchors live in.
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Restart     string            `yaml:"restart"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	StopGrace   string            `yaml:"stop_grace_period"`
	DependsOn   map[string]any    `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
}

func readCompose(t *testing.T, name string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "compose", name))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k := range f.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("%s: unknown top-level key %q", name, k)
		}
	}
	return f
}

// jetrelayServices are the services running the jetrelay image.
func (f composeFile) jetrelayServices() []string {
	var out []string
	for name, s := range f.Services {
		if strings.Contains(s.Image, "JETRELAY_IMAGE") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

var interpolation = regexp.MustCompile(`\$\{([A-Z_]+)(?::?[-?]([^}]*))?\}`)

// interpolate resolves ${VAR:-default} as Compose does with VAR unset, and
// takes given values first.
func interpolate(v string, given map[string]string) string {
	return interpolation.ReplaceAllStringFunc(v, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if g, ok := given[sub[1]]; ok {
			return g
		}
		if strings.Contains(m, ":-") {
			return sub[2]
		}
		return ""
	})
}

// settingNames are every environment name `jetrelay run` reads.
func settingNames(t *testing.T) map[string]bool {
	t.Helper()
	var b strings.Builder
	config.Usage(&b, "run")
	names := map[string]bool{}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "--") {
			names[f[1]] = true
		}
	}
	return names
}

func TestCompose_OverridesReplaceTheReferenceEventsServiceWithItsSettings(t *testing.T) {
	known := settingNames(t)
	for file, replicas := range map[string]int{"docker-compose.jetrelay.yml": 1, "docker-compose.jetrelay-cluster.yml": 3} {
		f := readCompose(t, file)
		services := f.jetrelayServices()
		if len(services) != replicas || !slices.Contains(services, "cycles-events") {
			t.Errorf("%s: jetrelay services %v, want %d including cycles-events (the reference's name)", file, services, replicas)
		}
		bridgeIDs := map[string]string{}
		for _, name := range services {
			s := f.Services[name]
			for _, k := range referenceEventsEnv {
				if _, ok := s.Environment[k]; !ok {
					t.Errorf("%s %s: %s missing (the reference service's setting)", file, name, k)
				}
			}
			for k := range s.Environment {
				if !known[k] {
					t.Errorf("%s %s: %s is not a jetrelay setting", file, name, k)
				}
			}
			if s.Environment["MANAGEMENT_PORT"] != "9980" || len(s.Ports) != 0 {
				t.Errorf("%s %s: MANAGEMENT_PORT %q ports %v, want 9980 and nothing published", file, name, s.Environment["MANAGEMENT_PORT"], s.Ports)
			}
			if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/usr/local/bin/jetrelay", "healthcheck"}) {
				t.Errorf("%s %s: healthcheck %+v, want the binary's own healthcheck command", file, name, s.Healthcheck)
			}
			if d, err := time.ParseDuration(s.StopGrace); err != nil || d <= 25*time.Second {
				t.Errorf("%s %s: stop_grace_period %q, want longer than the 25s drain", file, name, s.StopGrace)
			}
			id := s.Environment["JETRELAY_BRIDGE_ID"]
			if id == "" || bridgeIDs[id] != "" {
				t.Errorf("%s %s: bridge id %q, want a fixed one of its own (also %s)", file, name, id, bridgeIDs[id])
			}
			bridgeIDs[id] = name

			// The settings, with the secrets the operator supplies, load
			// as `jetrelay run` loads them.
			env := map[string]string{}
			for k, v := range s.Environment {
				env[k] = interpolate(v, map[string]string{"WEBHOOK_SECRET_ENCRYPTION_KEY": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})
			}
			cfg, err := config.Load("run", nil, func(k string) string { return env[k] }, io.Discard)
			if err != nil {
				t.Errorf("%s %s: settings do not load: %v", file, name, err)
				continue
			}
			if cfg.AllowPlaintext {
				t.Errorf("%s %s: WEBHOOK_SECRET_ALLOW_PLAINTEXT defaults to true, want false as the reference's production file", file, name)
			}
			checkNATS(t, file, name, f, cfg)
			for _, v := range s.Volumes {
				vol, _, _ := strings.Cut(v, ":")
				if _, ok := f.Volumes[vol]; !ok {
					t.Errorf("%s %s: volume %s not declared", file, name, vol)
				}
			}
		}
	}
}

// checkNATS: without NATS_URL one replica with its store on a volume; with
// it, every server it names is a service of the file, and the stream is
// replicated on all of them.
func checkNATS(t *testing.T, file, name string, f composeFile, cfg *config.Config) {
	t.Helper()
	if cfg.NATSURL == "" {
		if len(f.jetrelayServices()) != 1 || !slices.ContainsFunc(f.Services[name].Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+cfg.DataDir) }) {
			t.Errorf("%s %s: embedded JetStream needs exactly one replica and a volume at %s", file, name, cfg.DataDir)
		}
		return
	}
	servers := strings.Split(cfg.NATSURL, ",")
	for _, s := range servers {
		u, err := url.Parse(s)
		if err != nil {
			t.Errorf("%s %s: NATS_URL %q: %v", file, name, s, err)
			continue
		}
		if _, ok := f.Services[u.Hostname()]; !ok {
			t.Errorf("%s %s: NATS server %s is not a service of the file", file, name, u.Hostname())
		}
		if _, ok := f.Services[name].DependsOn[u.Hostname()]; !ok {
			t.Errorf("%s %s: does not depend on %s", file, name, u.Hostname())
		}
	}
	if cfg.StreamReplicas != len(servers) {
		t.Errorf("%s %s: JETRELAY_STREAM_REPLICAS %d on %d NATS servers", file, name, cfg.StreamReplicas, len(servers))
	}
}

// natsServices are the NATS services of the cluster file, by name.
func natsServices(f composeFile) []string {
	var out []string
	for name := range f.Services {
		if strings.HasPrefix(name, "nats-") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestCompose_ClusterServicesRunUnderPodman runs every service the cluster
// file adds, from their images, with the file's own commands and settings:
// the three nats-server nodes (FROM scratch, built from the Go module) form
// a JetStream cluster, and the three jetrelay replicas on it deliver a
// signed webhook and pass the file's healthcheck. Compose itself is not
// installed here: the test maps the file's host names and ports to the
// host network (Redis and the receiver run on the host).
func TestCompose_ClusterServicesRunUnderPodman(t *testing.T) {
	f := readCompose(t, "docker-compose.jetrelay-cluster.yml")
	p := newPodman(t)
	natsImage := p.buildImage(t, "build-nats.sh", "jetrelay-nats")
	relayImage := p.buildImage(t, "build.sh", "jetrelay")

	nodes := natsServices(f)
	if len(nodes) != 3 {
		t.Fatalf("NATS services %v, want three", nodes)
	}
	client, cluster := map[string]string{}, map[string]string{}
	for _, n := range nodes {
		client[n] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		cluster[n] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	hostPorts := func(s string, ports map[string]string, port string) string {
		for _, n := range nodes {
			s = strings.ReplaceAll(s, n+":"+port, ports[n])
		}
		return s
	}
	for _, n := range nodes {
		args := slices.Clone(f.Services[n].Command)
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "--cluster":
				args[i+1] = "nats://" + cluster[n]
			case "--routes":
				args[i+1] = hostPorts(args[i+1], cluster, "6222")
			case "--http_port":
				args[i+1] = strconv.Itoa(freePort(t))
			}
		}
		_, port, _ := strings.Cut(client[n], ":")
		args = append(args, "--addr", "127.0.0.1", "--port", port)
		p.container(t, n, append([]string{natsImage}, args...)...)
	}
	natsURL := hostPorts(f.Services["cycles-events"].Environment["NATS_URL"], client, "4222")
	awaitJetStreamCluster(t, natsURL, 90*time.Second)

	b := newBed(t)
	_, ep := b.endpoint(t, "/hook", "budget.exhausted", nil)
	var names []string
	for _, svc := range f.jetrelayServices() {
		given := map[string]string{"WEBHOOK_SECRET_ENCRYPTION_KEY": b.keyB64}
		env := map[string]string{}
		for k, v := range f.Services[svc].Environment {
			env[k] = interpolate(v, given)
		}
		redisURL, _ := url.Parse(b.redis.Server.URL())
		env["REDIS_HOST"], env["REDIS_PORT"] = redisURL.Hostname(), redisURL.Port()
		env["NATS_URL"] = natsURL
		env["MANAGEMENT_PORT"] = strconv.Itoa(freePort(t))
		env["JETRELAY_MANAGEMENT_HOST"] = "127.0.0.1"
		env["JETRELAY_WORKERS"] = "4"
		for k, v := range loopbackAllowed {
			env[k] = v
		}
		var args []string
		for k, v := range env {
			args = append(args, "-e", k+"="+v)
		}
		args = append(args, relayImage)
		names = append(names, p.container(t, svc, append(args, f.Services[svc].Command...)...))
	}

	ids := b.emit(t, "budget.exhausted", 6)
	b.awaitSuccess(t, ids, 90*time.Second)
	if st := ep.Stats(); st.Unique != len(ids) || st.BadSig != 0 {
		t.Errorf("receiver stats %+v, want %d distinct correctly signed deliveries", st, len(ids))
	}
	test := f.Services["cycles-events"].Healthcheck.Test[1:]
	for _, name := range names {
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := p.try(time.Minute, append([]string{"exec", name}, test...)...)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: the file's healthcheck %v still fails: %v %s", name, test, err, out)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// awaitJetStreamCluster waits until the cluster at urls has a JetStream
// meta leader and takes a stream replicated on all three nodes.
func awaitJetStreamCluster(t *testing.T, urls string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		last = func() error {
			nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			s, err := js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{Name: "COMPOSE_PROBE", Subjects: []string{"compose.probe"}, Replicas: 3, Storage: jetstream.FileStorage})
			if err != nil {
				return err
			}
			if n := len(s.CachedInfo().Cluster.Replicas); n != 2 {
				return fmt.Errorf("stream has %d followers, want 2", n)
			}
			return js.DeleteStream(cctx, "COMPOSE_PROBE")
		}()
		if last == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("no three-node JetStream cluster at %s within %s: %v", urls, within, last)
}
