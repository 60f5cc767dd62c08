package service

import (
	"errors"

	"github.com/coffer-backup/coffer/internal/policy"
)

// engineConfig checks the configuration's engine sections and every
// connection's options, without contacting anything. Operations that run
// policies use policyConfig, which also refuses what a policy cannot
// really do.
func (s *Service) engineConfig() (*policy.Config, error) {
	cfg, _, err := s.loadEngineConfig(false)
	return cfg, err
}

// policyConfig is engineConfig plus what each policy will really do on its
// connections (policyFindings): errors refuse the configuration, warnings
// are returned by policy name.
func (s *Service) policyConfig() (*policy.Config, map[string][]finding, error) {
	return s.loadEngineConfig(true)
}

func (s *Service) loadEngineConfig(policies bool) (*policy.Config, map[string][]finding, error) {
	cfg := s.cfg.Engine
	errs := []error{cfg.Validate()}
	for _, c := range cfg.Connections {
		if c.Kind == "" {
			continue // Validate says so
		}
		kind, ok := connectorKind(c.Kind)
		if !ok {
			errs = append(errs, unknownKind(c.Name, c.Kind))
			continue
		}
		errs = append(errs, kind.Check(ConnectionConfig{Connection: c}))
	}
	warnings := map[string][]finding{}
	if policies {
		for _, p := range cfg.Policies {
			for _, f := range policyFindings(cfg, p) {
				if f.Level == levelError {
					errs = append(errs, errors.New(f.Message))
				} else {
					warnings[p.Name] = append(warnings[p.Name], f)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		where := s.cfg.EngineSource
		if where == "" {
			where = "configuration"
		}
		return nil, nil, invalidf("%s: %v", where, err)
	}
	return cfg, warnings, nil
}
