package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// The monitoring kit that operators load: deploy/monitoring.
const (
	alertsFile    = "../../deploy/monitoring/alerts.yml"
	alertTests    = "../../deploy/monitoring/alerts_test.yml"
	dashboardFile = "../../deploy/monitoring/grafana-dashboard.json"
	runbooks      = "../../docs/runbooks.md"
	runbookURL    = "https://github.com/coffer-backup/coffer/blob/main/docs/runbooks.md#"
)

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var doc struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &doc)
	var rules []alertRule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s holds no rules", alertsFile)
	}
	return rules
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert says how bad it is and what it means, and links to a
// section of the runbooks that exists.
func TestAlertsSayWhatToDo(t *testing.T) {
	doc, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	for _, r := range readAlertRules(t) {
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookURL)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is not a section of docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
		}
	}
}

// Every alert has a unit test in which it fires and one in which it
// stays quiet, and promtool passes the rules and their tests.
func TestAlertRules(t *testing.T) {
	var doc struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTests, &doc)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range doc.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range readAlertRules(t) {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: alerts_test.yml needs a case where it fires (%v) and one where it stays quiet (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
	promtool := testutil.RequireBinary(t, "promtool") // Debian's prometheus package
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy/monitoring"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every query of the dashboard uses metrics coffer exposes (or
// Prometheus' own up), so no panel stays empty for a misspelt name.
func TestDashboardQueriesUseExposedMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	exposed := exposedNames(t)
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			for _, n := range metricName.FindAllString(target.Expr, -1) {
				if !exposed[trimSeriesSuffix(n)] {
					t.Errorf("panel %q queries %s, which coffer does not expose", p.Title, n)
				}
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}
