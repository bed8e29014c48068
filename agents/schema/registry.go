package schema

import (
	"github.com/dataworkers/dw/internal/deps/clients"
	"github.com/dataworkers/dw/internal/registry"
)

// registryClient is the Schema Registry client deps holds, or says the
// registry is not configured (ok false).
func (h *handlers) registryClient() (*registry.Client, bool, error) {
	if !clients.RegistryConfigured(h.d) {
		return nil, false, nil
	}
	c, err := clients.Registry(h.d)
	return c, true, err
}
