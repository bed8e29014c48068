package routines

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/groupowner"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/schemahistory"
)

// Sources reach the streaming systems a routine observes, built on first
// use (dw watch gives its deps' clients); a nil member means the system is
// not configured.
type Sources struct {
	// Cluster names the Kafka cluster in asset ids (kafka://<cluster>/<topic>).
	Cluster  string
	Kafka    func(ctx context.Context) (*kafka.Client, error)
	Connect  func() (*connect.Client, error)
	Registry func() (*registry.Client, error)
	Flink    func() (*flink.Client, error)
}

func (s Sources) topicAsset(topic string) string { return "kafka://" + s.Cluster + "/" + topic }

// observeStreams reads consumer lag, topic health and connector status.
// What is wrong becomes a symptom on the asset it starves: the topic a
// group lags on (load lag), the topic that cannot be read or written
// (volume), the tables a failed connector stopped filling (freshness).
func (r *Runner) observeStreams(ctx context.Context, svc *incidents.Service, rc config.Routine, o *observation) {
	src := r.o.Sources
	now := r.o.Clock.Now()
	// also are lines for the owner's message beyond the symptoms.
	report := func(kind, target string, syms []incidents.Symptom, also ...string) {
		res, err := svc.ReportSymptoms(ctx, incidents.ReportParams{Symptoms: syms, Actor: "dw watch (" + rc.Name + ")"})
		if err != nil {
			o.fail(kind, target, fmt.Errorf("reporting the findings failed: %w", err))
			return
		}
		o.reported(res.Incidents, syms[0].Asset, append(symptomLines(syms), also...))
	}
	// owners names the job behind a lagging group and its owner, built
	// on the first lagging group (it reads the graph's jobs once).
	var owners *groupowner.Finder
	if len(rc.ConsumerLag) > 0 || len(rc.Topics) > 0 {
		var client *kafka.Client
		var err error
		if src.Kafka == nil {
			err = errors.New("no kafka configured: set kafka.brokers in dw.yaml")
		} else {
			client, err = src.Kafka(ctx)
		}
		for _, l := range rc.ConsumerLag {
			if err != nil {
				o.fail("consumer_lag", l.Group, err)
				continue
			}
			f := kafka.LagFilter{Groups: []string{l.Group}}
			if l.Topic != "" {
				f.Topics = []string{l.Topic}
			}
			m := &kafka.Monitor{Source: client, DB: r.o.DB, Clock: r.o.Clock, Cluster: src.Cluster}
			rep, lerr := m.ConsumerLag(ctx, f)
			if lerr != nil {
				o.fail("consumer_lag", l.Group, lerr)
				continue
			}
			for _, g := range rep.Groups {
				fd := Finding{Kind: "consumer_lag", Target: g.Group, Status: "ok",
					Detail: fmt.Sprintf("%s: %s, total lag %d", g.Group, g.Status, g.TotalLag)}
				if g.Status == kafka.StatusUnknown {
					fd.Status = "learning"
				}
				if g.Status == kafka.StatusOK || g.Status == kafka.StatusUnknown {
					o.findings = append(o.findings, fd)
					continue
				}
				fd.Status = "problem"
				if owners == nil {
					owners = groupowner.New(ctx, r.graph, nil, r.o.Config)
				}
				consumer := owners.Find(ctx, g)
				fd.Detail += "; " + consumer.Line()
				var syms []incidents.Symptom
				for _, p := range g.Partitions {
					if p.Status == kafka.StatusOK || p.Status == kafka.StatusUnknown {
						continue
					}
					asset := src.topicAsset(p.Topic)
					if fd.Asset == "" {
						fd.Asset = asset
					}
					syms = append(syms, incidents.Symptom{Kind: incidents.SymptomLoadLag, Asset: asset, Metric: "consumer_lag:" + g.Group,
						Observed: float64(p.Lag), At: now, Source: "get_consumer_lag",
						Detail: fmt.Sprintf("consumer group %s is %s on %s[%d]: %d records behind (%s)", g.Group, p.Status, p.Topic, p.Partition, p.Lag, p.Reason)})
				}
				o.findings = append(o.findings, fd)
				if len(syms) > 0 {
					report("consumer_lag", g.Group, syms, "consumer group "+g.Group+": "+consumer.Line())
				}
			}
		}
		if len(rc.Topics) > 0 {
			if err != nil {
				for _, t := range rc.Topics {
					o.fail("topic", t, err)
				}
			} else if rep, herr := client.TopicHealth(ctx, kafka.HealthParams{Topics: rc.Topics}); herr != nil {
				for _, t := range rc.Topics {
					o.fail("topic", t, herr)
				}
			} else {
				for _, th := range rep.Topics {
					asset := src.topicAsset(th.Topic)
					fd := Finding{Kind: "topic", Target: th.Topic, Asset: asset, Status: "ok", Detail: th.Topic + ": " + th.Health}
					if th.Error != "" {
						o.fail("topic", th.Topic, errors.New(th.Error))
						continue
					}
					var details []string
					for _, is := range th.Issues {
						details = append(details, is.Kind+": "+is.Detail)
					}
					if len(details) > 0 {
						fd.Detail += " (" + strings.Join(details, "; ") + ")"
					}
					// A critical topic cannot be read or written: data stops
					// arriving downstream. A warning (lost redundancy) is a
					// finding, not yet a symptom.
					if th.Health == "critical" {
						fd.Status = "problem"
						report("topic", th.Topic, []incidents.Symptom{{Kind: incidents.SymptomVolume, Asset: asset, Metric: "topic_health",
							At: now, Source: "get_topic_health", Detail: fd.Detail}})
					}
					o.findings = append(o.findings, fd)
				}
			}
		}
	}
	r.observeConnectors(ctx, rc, report, o)
	r.observeChanges(ctx, rc, o)
}

// observeConnectors reads connector status: a failed or degraded sink
// starves the tables it fills (or, unnamed, the topic it reads).
func (r *Runner) observeConnectors(ctx context.Context, rc config.Routine, report func(kind, target string, syms []incidents.Symptom, also ...string), o *observation) {
	src, now := r.o.Sources, r.o.Clock.Now()
	if len(rc.Connectors) > 0 {
		var client *connect.Client
		var err error
		if src.Connect == nil {
			err = errors.New("no kafka connect configured: set kafka_connect.url in dw.yaml")
		} else {
			client, err = src.Connect()
		}
		var rep *connect.StatusReport
		if err == nil {
			rep, err = client.Report(ctx, connect.StatusParams{Connectors: rc.Connectors}, nil)
		}
		if err != nil {
			for _, c := range rc.Connectors {
				o.fail("connector", c, err)
			}
			return
		}
		for _, cr := range rep.Connectors {
			fd := Finding{Kind: "connector", Target: cr.Name, Status: "ok", Detail: fmt.Sprintf("%s: %s (%s)", cr.Name, cr.Health, cr.State)}
			if cr.Health != "failed" && cr.Health != "degraded" {
				o.findings = append(o.findings, fd)
				continue
			}
			fd.Status = "problem"
			var syms []incidents.Symptom
			for _, fl := range cr.Flows {
				// The table a sink fills, as the catalog names it; else the
				// topic it stopped reading (a bare table name is no asset id).
				asset := ""
				if fl.Direction == "topic_to_table" && fl.Table != "" {
					if got, err := r.graph.Resolve(ctx, fl.Table); err == nil {
						asset = got
					}
				}
				if asset == "" && fl.Topic != "" && !fl.TopicPattern {
					asset = src.topicAsset(fl.Topic)
				}
				if asset == "" {
					continue
				}
				if fd.Asset == "" {
					fd.Asset = asset
				}
				syms = append(syms, incidents.Symptom{Kind: incidents.SymptomFreshness, Asset: asset, Metric: "connector:" + cr.Name,
					Observed: float64(cr.FailedTasks), At: now, Source: "get_connector_status",
					Detail: fmt.Sprintf("connector %s is %s (%d failed task(s)): %s stops receiving data", cr.Name, cr.Health, cr.FailedTasks, asset)})
			}
			o.findings = append(o.findings, fd)
			if len(syms) > 0 {
				report("connector", cr.Name, syms)
			}
		}
	}
}

// observeChanges writes what changed upstream to the change log: new
// versions of schema subjects and Flink restores. They are not symptoms;
// a later diagnosis ranks them as causes.
func (r *Runner) observeChanges(ctx context.Context, rc config.Routine, o *observation) {
	src := r.o.Sources
	if len(rc.Subjects) > 0 {
		var client *registry.Client
		err := errors.New("no schema registry configured: set schema_registry.url in dw.yaml")
		if src.Registry != nil {
			client, err = src.Registry()
		}
		for _, subject := range rc.Subjects {
			if err != nil {
				o.fail("schema", subject, err)
				continue
			}
			stored, fresh, serr := schemahistory.ReadSubject(ctx, r.o.DB, client, subject, "dw watch ("+rc.Name+")", r.o.Clock)
			if serr != nil {
				o.fail("schema", subject, serr)
				continue
			}
			f := Finding{Kind: "schema", Target: subject, Asset: "schema://" + subject, Status: "ok",
				Detail: fmt.Sprintf("%s: %d version(s) known, none new", subject, len(stored))}
			switch {
			case len(fresh) > 0 && len(fresh) == len(stored):
				f.Detail = fmt.Sprintf("%s: first read; %d version(s) remembered as its history", subject, len(stored))
			case len(fresh) > 0:
				vs := make([]string, len(fresh))
				for i, v := range fresh {
					vs[i] = strconv.Itoa(v.Version)
				}
				f.Status, f.Detail = "changed", fmt.Sprintf("%s: new version(s) %s written to the change log", subject, strings.Join(vs, ", "))
			}
			o.findings = append(o.findings, f)
		}
	}
	if len(rc.FlinkJobs) > 0 {
		var client *flink.Client
		err := errors.New("no flink configured: set flink.url in dw.yaml")
		if src.Flink != nil {
			client, err = src.Flink()
		}
		svc := r.incidents()
		for _, job := range rc.FlinkJobs {
			if err != nil {
				o.fail("flink", job, err)
				continue
			}
			rep, ferr := client.ReadRestores(ctx, flink.JobParams(job))
			if ferr != nil {
				o.fail("flink", job, ferr)
				continue
			}
			f := Finding{Kind: "flink", Target: job, Asset: flink.Asset(job), Status: "ok", Detail: rep.Summary()}
			var recorded []string
			for _, rs := range flink.RecordRestores(ctx, &changelog.Log{DB: svc.DB, Clock: svc.Clock}, rep, client.URL(), "dw watch ("+rc.Name+")").Restores {
				if rs.RecordError != "" {
					o.fail("flink", job, errors.New(rs.RecordError))
					continue
				}
				if rs.Created {
					recorded = append(recorded, fmt.Sprintf("restore from %d at %s", rs.CheckpointID, rs.At.UTC().Format("2006-01-02 15:04Z")))
				}
			}
			if len(recorded) > 0 {
				f.Status, f.Detail = "changed", f.Detail+"; written to the change log: "+strings.Join(recorded, ", ")
			}
			o.findings = append(o.findings, f)
		}
	}
}
