package controlplane

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfigFile writes cfg as a self-contained kubeconfig file (mode
// 0600) with a single context: CA, client certificate and key are embedded
// even when cfg names files, and the bearer token, TLS server name and
// impersonation settings are kept. Use it for a component that only takes a
// kubeconfig path, for instance a scheduler acting as a less privileged user
// through cfg.Impersonate.
func WriteKubeconfigFile(path string, cfg *rest.Config) error {
	cluster := clientcmdapi.NewCluster()
	cluster.Server = cfg.Host
	cluster.TLSServerName = cfg.ServerName
	cluster.InsecureSkipTLSVerify = cfg.Insecure
	var err error
	if cluster.CertificateAuthorityData, err = dataOrFile(cfg.CAData, cfg.CAFile); err != nil {
		return err
	}

	user := clientcmdapi.NewAuthInfo()
	user.Token = cfg.BearerToken
	user.TokenFile = cfg.BearerTokenFile
	user.Username = cfg.Username
	user.Password = cfg.Password
	user.Impersonate = cfg.Impersonate.UserName
	user.ImpersonateUID = cfg.Impersonate.UID
	user.ImpersonateGroups = cfg.Impersonate.Groups
	user.ImpersonateUserExtra = cfg.Impersonate.Extra
	if user.ClientCertificateData, err = dataOrFile(cfg.CertData, cfg.CertFile); err != nil {
		return err
	}
	if user.ClientKeyData, err = dataOrFile(cfg.KeyData, cfg.KeyFile); err != nil {
		return err
	}

	const name = "wasmsched"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = cluster
	kc.AuthInfos[name] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster = name
	ctx.AuthInfo = name
	ctx.Namespace = "default"
	kc.Contexts[name] = ctx
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("controlplane: write kubeconfig: %w", err)
	}
	return nil
}

func dataOrFile(data []byte, file string) ([]byte, error) {
	if len(data) > 0 || file == "" {
		return data, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("controlplane: write kubeconfig: %w", err)
	}
	return b, nil
}
