package service

import "github.com/coffer-backup/coffer/internal/hypervisor"

// ServingConnector is the connector the running server's engine has for
// connection name (tests of what a reload opens and closes).
func (s *Service) ServingConnector(name string) (hypervisor.Connector, bool) {
	eng := s.serving.Load()
	if eng == nil {
		return nil, false
	}
	return eng.Connector(name)
}
