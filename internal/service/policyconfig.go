package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/configobj"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service/policyfind"
)

// EngineConfig checks the engine sections of the configuration in effect
// and every connection's options, without contacting anything.
// Operations that run policies use PolicyConfig, which also refuses what
// a policy cannot really do.
func (s *Service) EngineConfig(ctx context.Context) (*policy.Config, error) {
	cfg, _, err := s.loadEngineConfig(ctx, false)
	return cfg, err
}

// PolicyConfig is EngineConfig plus what each policy will really do on its
// connections (PolicyFindings): errors refuse the configuration, warnings
// are returned by policy name.
func (s *Service) PolicyConfig(ctx context.Context) (*policy.Config, map[string][]api.Finding, error) {
	return s.loadEngineConfig(ctx, true)
}

func (s *Service) loadEngineConfig(ctx context.Context, policies bool) (*policy.Config, map[string][]api.Finding, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	return CheckState(st, policies)
}

// CheckState checks the engine sections of a configuration in effect, as
// loadEngineConfig does.
func CheckState(st *configobj.State, policies bool) (*policy.Config, map[string][]api.Finding, error) {
	errs, warnings := EngineProblems(st.Engine, policies)
	if err := errors.Join(errs...); err != nil {
		return nil, nil, Invalidf("%s: %v", ConfigWhere(st), err)
	}
	return st.Engine, warnings, nil
}

// EngineProblems checks an engine configuration: the file's validators,
// every connection's options and, with policies, what each policy asks
// of its connections that they cannot do. It returns the problems, and
// the warnings by policy name.
func EngineProblems(cfg *policy.Config, policies bool) ([]error, map[string][]api.Finding) {
	errs := []error{cfg.Validate()}
	for _, c := range cfg.Connections {
		if c.Kind == "" {
			continue // Validate says so
		}
		kind, ok := hvall.Lookup(c.Kind)
		if !ok {
			errs = append(errs, hvall.UnknownKind(c.Name, c.Kind))
			continue
		}
		errs = append(errs, kind.Check(hvall.Config{Connection: c}))
	}
	errs = append(errs, cfg.LatencyControl.Unmeasurable(cfg.Connections, func(k string) bool { return policyfind.KindOf(k).DiskLatency })...)
	warnings := map[string][]api.Finding{}
	if policies {
		for _, p := range cfg.Policies {
			for _, f := range policyfind.PolicyFindings(cfg, p) {
				if f.Level == policyfind.LevelError {
					errs = append(errs, errors.New(f.Message))
				} else {
					warnings[p.Name] = append(warnings[p.Name], f)
				}
			}
		}
	}
	return errs, warnings
}

// CheckConfig is the check of changes made through the API (a
// configobj.Checker): every problem the whole configuration has
// (configobj refuses a change for those it adds). The maintenance
// section's jobs name repositories, policies and media libraries the
// API can change, so a change that would break them (deleting a
// repository gc runs on, a policy whose retention forget applies) is
// refused like one that breaks a policy.
func (s *Service) CheckConfig(eng *policy.Config, nc *notify.Config, m *maintenance.Config) error {
	errs, _ := EngineProblems(eng, true)
	_, maint := m.Jobs(eng)
	return errors.Join(append(errs, nc.Validate(), maint)...)
}

// ConfigWhere names where the configuration in effect comes from, for
// messages about it.
func ConfigWhere(st *configobj.State) string {
	where := st.File.Path
	if where == "" {
		where = "configuration"
	}
	if n := st.FromCatalogCount(); n > 0 {
		where += fmt.Sprintf(" (with %d objects created through the API; `coffer config show` says where each is defined)", n)
	}
	return where
}
