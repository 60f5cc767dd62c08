package plan

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/retention"
)

// An hourly policy with the full GFS set, yearly points included: the
// forecast simulates two years of hourly runs, each judged by the
// retention (the slowest forecast a plan request makes).
func BenchmarkCapacityHourlyGFS(b *testing.B) {
	sc, err := cron.ParseStandard("0 * * * *")
	if err != nil {
		b.Fatal(err)
	}
	in := CapacityInput{VMs: vmsOf(100, CapacityVM{Used: 100 * gib, Change: 2 * gib, Reduction: 0.5}),
		Retention: retention.Policy{Hourly: 24, Daily: 7, Weekly: 4, Monthly: 12, Yearly: 3},
		Schedule:  sc, First: monday, Now: monday.AddDate(0, 2, 0), Location: time.UTC}
	for b.Loop() {
		if _, err := ForecastCapacity(in); err != nil {
			b.Fatal(err)
		}
	}
}
