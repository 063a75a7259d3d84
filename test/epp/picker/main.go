// Command picker is the Gateway API Inference Extension's endpoint picker (EPP) at the version
// go.mod pins (v1.5.0: the full picker, cmd/epp), with every listener bound to one IP.
//
// cmd/epp's Runner opens its ext_proc and health gRPC servers through internal/runnable
// (net.Listen on ":port") and its metrics server on ":port": every interface, with no flag to
// narrow it, and Runner.setup is unexported. This main takes the same flags (the module's own
// server.Options.AddFlags, parsed the same way, unknown flags refused) and redoes Runner.setup
// from the module's exported packages (cmd/epp/runner/runner.go at v1.5.0 is the model, step
// for step), but opens the listeners itself on $LOCALCLUSTER_POD_IP (the pod's 127.P.x.y on the
// local cluster), else 127.0.0.1. The scheduling (plugins, scorers, config loading), the
// datastore, the reconcilers, the model-server metrics collection and the ext_proc exchange
// are the module's, unchanged. See test/epp/README.md.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "sigs.k8s.io/gateway-api-inference-extension/apix/config/v1alpha1"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/common"
	logutil "sigs.k8s.io/gateway-api-inference-extension/pkg/common/observability/logging"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/common/observability/profiling"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/common/observability/tracing"
	backendmetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/backend/metrics"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/config"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/config/loader"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
	datalayerlogger "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer/logger"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datastore"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/flowcontrol"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/flowcontrol/contracts"
	fccontroller "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/flowcontrol/controller"
	fcregistry "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/flowcontrol/registry"
	fwkplugin "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	fwkrh "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/requesthandling"
	extractormetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/extractor/metrics"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"
	sourcenotifications "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/notifications"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/fairness"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/ordering"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/saturationdetector/concurrency"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/flowcontrol/usagelimits"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/admitter/latencyslo"
	reqdataprodprefix "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/requestattributereporter"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/requestdataproducer/inflightload"
	latencyproducer "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/requestdataproducer/predictedlatency"
	testresponsereceived "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/test/responsereceived"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/openai"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/passthrough"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/vllmgrpc"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/filter/sloheadroomtier"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/picker"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/profile"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/kvcacheutilization"
	latencyscorer "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/latency"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/loraaffinity"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/predictedlatency"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/prefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/queuedepth"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/runningrequests"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/scorer/tokenload"
	testfilter "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/test/filter"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/handlers"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/metrics"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/metrics/collectors"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/requestcontrol"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/scheduling"
	runserver "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/server"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/util/env"
	"sigs.k8s.io/gateway-api-inference-extension/version"
)

// PodIPEnv names the variable the local cluster's kubelet sets to the pod's IP; every listener
// binds it (127.0.0.1 when unset).
const PodIPEnv = "LOCALCLUSTER_POD_IP"

// enableExperimentalFlowControlLayer is cmd/epp's deprecated environment switch for flow control.
const enableExperimentalFlowControlLayer = "ENABLE_EXPERIMENTAL_FLOW_CONTROL_LAYER"

var setupLog = ctrl.Log.WithName("setup")

func main() {
	if err := run(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "picker failed")
		os.Exit(1)
	}
}

// listenIP is the address every listener binds: the pod's IP on the local cluster.
func listenIP() string {
	if ip := os.Getenv(PodIPEnv); ip != "" {
		return ip
	}
	return "127.0.0.1"
}

func hostPort(port int) string { return net.JoinHostPort(listenIP(), strconv.Itoa(port)) }

// run is cmd/epp/runner.Runner.Run.
func run(ctx context.Context) error {
	logutil.InitSetupLogging()
	setupLog.Info("GIE build (test/epp picker)", "commit-sha", version.CommitSHA, "build-ref", version.BuildRef)

	opts := runserver.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	pflag.Parse() // pflag.CommandLine exits on an unknown flag, as cmd/epp does
	if err := opts.Complete(); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		setupLog.Error(err, "Failed to validate flags")
		return err
	}
	if ip := net.ParseIP(listenIP()); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("%s=%q: want one IP, not all interfaces", PodIPEnv, listenIP())
	}
	flags := map[string]any{}
	pflag.VisitAll(func(f *pflag.Flag) { flags[f.Name] = f.Value })
	setupLog.Info("Flags processed", "flags", flags)
	logutil.InitLogging(&opts.ZapOptions)

	if opts.Tracing {
		if err := tracing.InitTracing(ctx, setupLog, "gateway-api-inference-extension/epp"); err != nil {
			return fmt.Errorf("failed to init tracing %w", err)
		}
	}
	cfg, err := ctrl.GetConfig() // KUBECONFIG, then in-cluster
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	pmc, err := backendmetrics.NewPodMetricsClientImpl(setupLog, backendmetrics.Config{
		ModelServerMetricsScheme:        opts.ModelServerMetricsScheme,
		ModelServerMetricsHTTPSInsecure: opts.ModelServerMetricsHTTPSInsecure,
		ModelServerMetricsPath:          opts.ModelServerMetricsPath,
		TotalQueuedRequestsMetric:       opts.TotalQueuedRequestsMetric,
		TotalRunningRequestsMetric:      opts.TotalRunningRequestsMetric,
		KVCacheUsagePercentageMetric:    opts.KVCacheUsagePercentageMetric,
		LoRAInfoMetric:                  opts.LoRAInfoMetric,
		CacheInfoMetric:                 opts.CacheInfoMetric,
	})
	if err != nil {
		return err
	}
	mgr, err := setup(ctx, cfg, opts, pmc)
	if err != nil {
		return err
	}
	setupLog.Info("Controller manager starting")
	return mgr.Start(ctx)
}

// setup is cmd/epp/runner.Runner.setup with our listeners.
func setup(ctx context.Context, cfg *rest.Config, opts *runserver.Options, pmc backendmetrics.PodMetricsClient) (ctrl.Manager, error) {
	rawConfig, featureGates, err := parseConfigurationPhaseOne(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to parse configuration: %w", err)
	}
	useNewMetrics := !featureGates[datalayer.EnableLegacyMetricsFeatureGate]
	dlRuntime := datalayer.NewRuntime(opts.RefreshMetricsInterval)
	var epf datalayer.EndpointFactory = dlRuntime
	if !useNewMetrics {
		epf = backendmetrics.NewPodMetricsFactory(pmc, opts.RefreshMetricsInterval)
	}
	gknn, err := extractGKNN(opts.PoolName, opts.PoolGroup, opts.PoolNamespace, opts.EndpointSelector)
	if err != nil {
		return nil, err
	}
	// Without --endpoint-selector (standalone mode) the InferencePool and the other CRD
	// reconcilers start.
	startCrdReconcilers := opts.EndpointSelector == ""
	controllerCfg := runserver.NewControllerConfig(startCrdReconcilers)
	if err := controllerCfg.PopulateControllerConfig(cfg); err != nil {
		return nil, fmt.Errorf("failed to populate controller config: %w", err)
	}
	ds := datastore.NewDatastore(ctx, epf, int32(opts.ModelServerMetricsPort))
	if !startCrdReconcilers {
		pool, err := newEndpointPoolFromOptions(opts.PoolNamespace, opts.PoolName, opts.EndpointSelector, opts.EndpointTargetPorts)
		if err != nil {
			return nil, err
		}
		ds = ds.WithEndpointPool(pool)
	}

	eppConfig, requestControlConfig, parser, err := parseConfigurationPhaseTwo(ctx, rawConfig, ds)
	if err != nil {
		return nil, fmt.Errorf("failed to parse configuration: %w", err)
	}

	metrics.Register(collectors.NewInferencePoolMetricsCollector(ds))
	metrics.RecordInferenceExtensionInfo(version.CommitSHA, version.BuildRef)
	metricsServerOptions := metricsserver.Options{
		BindAddress: hostPort(opts.MetricsPort), // cmd/epp: ":port"
	}
	if opts.MetricsEndpointAuth {
		metricsServerOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	isLeader := &atomic.Bool{}
	mgr, err := runserver.NewDefaultManager(controllerCfg, *gknn, cfg, metricsServerOptions, opts.EnableLeaderElection)
	if err != nil {
		return nil, err
	}
	if opts.EnableLeaderElection {
		setupLog.Info("Leader election enabled")
		go func() {
			<-mgr.Elected()
			isLeader.Store(true)
			setupLog.Info("This instance is now the leader!")
		}()
	} else {
		isLeader.Store(true)
	}
	if opts.EnablePprof {
		if err := profiling.SetupPprofHandlers(mgr); err != nil {
			return nil, fmt.Errorf("failed to setup pprof handlers: %w", err)
		}
	}

	scheduler := scheduling.NewSchedulerWithConfig(eppConfig.SchedulerConfig)
	disallowedExtractorType := ""
	if !useNewMetrics {
		disallowedExtractorType = extractormetrics.MetricsExtractorType
	}
	if err := dlRuntime.Configure(eppConfig.DataConfig, useNewMetrics, disallowedExtractorType, setupLog); err != nil {
		return nil, fmt.Errorf("failed to initialize data layer: %w", err)
	}
	if err := dlRuntime.Start(ctx, mgr); err != nil {
		return nil, fmt.Errorf("failed to start data layer: %w", err)
	}

	var admissionController requestcontrol.AdmissionController
	var endpointCandidates contracts.EndpointCandidates = requestcontrol.NewDatastoreEndpointCandidates(ds,
		requestcontrol.WithDisableEndpointSubsetFilter(opts.DisableEndpointSubsetFilter))
	if featureGates[flowcontrol.FeatureGate] {
		endpointCandidates = requestcontrol.NewCachedEndpointCandidates(ctx, endpointCandidates, 50*time.Millisecond)
		registry, err := fcregistry.NewFlowRegistry(eppConfig.FlowControlConfig.Registry, setupLog)
		if err != nil {
			return nil, fmt.Errorf("failed to initialize Flow Registry: %w", err)
		}
		fc, err := fccontroller.NewFlowController(ctx, opts.PoolName, eppConfig.FlowControlConfig.Controller,
			fccontroller.Deps{
				Registry:           registry,
				SaturationDetector: eppConfig.SaturationDetector,
				EndpointCandidates: endpointCandidates,
				UsageLimitPolicy:   eppConfig.FlowControlConfig.UsageLimitPolicy,
			})
		if err != nil {
			return nil, fmt.Errorf("failed to initialize Flow Controller: %w", err)
		}
		go registry.Run(ctx)
		admissionController = requestcontrol.NewFlowControlAdmissionController(fc, opts.PoolName)
	} else {
		admissionController = requestcontrol.NewLegacyAdmissionController(eppConfig.SaturationDetector, endpointCandidates)
	}
	director := requestcontrol.NewDirectorWithConfig(ds, scheduler, admissionController, parser, endpointCandidates, requestControlConfig)

	// The reconcilers (InferencePool, pods, and the optional InferenceObjective /
	// InferenceModelRewrite) only; the runner's gRPC runnables, which listen on ":port", are not used.
	serverRunner := &runserver.ExtProcServerRunner{GKNN: *gknn, Datastore: ds, ControllerCfg: controllerCfg}
	if err := serverRunner.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("failed to setup EPP controllers: %w", err)
	}

	// Listen now, so a taken address fails the start.
	healthLis, err := net.Listen("tcp", hostPort(opts.GRPCHealthPort))
	if err != nil {
		return nil, fmt.Errorf("health listener: %w", err)
	}
	extProcLis, err := net.Listen("tcp", hostPort(opts.GRPCPort))
	if err != nil {
		return nil, fmt.Errorf("ext_proc listener: %w", err)
	}

	healthSrv := grpc.NewServer()
	healthpb.RegisterHealthServer(healthSrv, &healthServer{logger: ctrl.Log.WithName("health"), datastore: ds,
		isLeader: isLeader, leaderElectionEnabled: opts.EnableLeaderElection})
	if err := mgr.Add(noLeaderElection{serveGRPC("health", healthSrv, healthLis)}); err != nil {
		return nil, err
	}

	extProcLog := ctrl.Log.WithName("ext-proc")
	if err := mgr.Add(noLeaderElection{manager.RunnableFunc(func(ctx context.Context) error {
		// What ExtProcServerRunner.AsRunnable does before serving.
		if featureGates[datalayer.ExperimentalDatalayerFeatureGate] || useNewMetrics {
			datalayerlogger.StartMetricsLogger(ctx, ds, opts.RefreshPrometheusMetricsInterval, opts.MetricsStalenessThreshold)
		} else {
			backendmetrics.StartMetricsLogger(ctx, ds, opts.RefreshPrometheusMetricsInterval, opts.MetricsStalenessThreshold)
		}
		var srvOpts []grpc.ServerOption
		if opts.SecureServing {
			creds, err := serverCreds(ctx, opts.CertPath, opts.EnableCertReload)
			if err != nil {
				return err
			}
			srvOpts = append(srvOpts, grpc.Creds(creds))
		}
		srv := grpc.NewServer(srvOpts...)
		extprocv3.RegisterExternalProcessorServer(srv, handlers.NewStreamingServer(ds, director, parser))
		if opts.HealthChecking {
			hc := health.NewServer()
			healthpb.RegisterHealthServer(srv, hc)
			hc.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		}
		extProcLog.Info("ext_proc listening", "addr", extProcLis.Addr().String(), "tls", opts.SecureServing)
		return serveGRPC("ext-proc", srv, extProcLis).Start(ctx)
	})}); err != nil {
		return nil, err
	}
	setupLog.Info("listeners", "ext_proc", extProcLis.Addr().String(), "health", healthLis.Addr().String(),
		"metrics", metricsServerOptions.BindAddress)
	return mgr, nil
}

// parseConfigurationPhaseOne reads --config-text / --config-file (neither: the module's default
// configuration), registers the feature gates and the in-tree plugins, and decodes the config.
func parseConfigurationPhaseOne(ctx context.Context, opts *runserver.Options) (*configapi.EndpointPickerConfig, map[string]bool, error) {
	var configBytes []byte
	if opts.ConfigText != "" {
		configBytes = []byte(opts.ConfigText)
	} else if opts.ConfigFile != "" {
		b, err := os.ReadFile(opts.ConfigFile)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to load config from a file '%s' - %w", opts.ConfigFile, err)
		}
		configBytes = b
	}
	loader.RegisterFeatureGate(datalayer.ExperimentalDatalayerFeatureGate)
	loader.RegisterFeatureGate(datalayer.EnableLegacyMetricsFeatureGate)
	loader.RegisterFeatureGate(flowcontrol.FeatureGate)
	registerInTreePlugins()
	return loader.LoadRawConfig(configBytes, ctrl.LoggerFrom(ctx))
}

func parseConfigurationPhaseTwo(ctx context.Context, rawConfig *configapi.EndpointPickerConfig, ds datastore.Datastore) (*config.Config, *requestcontrol.Config, fwkrh.Parser, error) {
	applyDeprecatedEnvFeatureGate(rawConfig)
	handle := fwkplugin.NewEppHandle(ctx, func() []types.NamespacedName {
		pods := ds.PodList(datastore.AllPodsPredicate)
		names := make([]types.NamespacedName, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.GetMetadata().NamespacedName)
		}
		return names
	})
	cfg, err := loader.InstantiateAndConfigure(rawConfig, handle, ctrl.LoggerFrom(ctx))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("failed to load the configuration - %w", err)
	}
	rc := requestcontrol.NewConfig()
	rc.AddPlugins(handle.GetAllPlugins()...)
	dag, err := datalayer.ValidateAndOrderDataDependencies(handle.GetAllPlugins())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("failed to load the configuration - %w", err)
	}
	rc.OrderPrepareDataPlugins(dag)
	setupLog.Info("parsed config", "scheduler-config", cfg.SchedulerConfig)
	return cfg, rc, handlers.NewParser(cfg.ParserConfig), nil
}

func applyDeprecatedEnvFeatureGate(rawConfig *configapi.EndpointPickerConfig) {
	if _, ok := os.LookupEnv(enableExperimentalFlowControlLayer); ok && env.GetEnvBool(enableExperimentalFlowControlLayer, false, setupLog) {
		rawConfig.FeatureGates = append(rawConfig.FeatureGates, flowcontrol.FeatureGate)
	}
}

// registerInTreePlugins is cmd/epp's list (runner.go registerInTreePlugins at v1.5.0).
func registerInTreePlugins() {
	fwkplugin.Register(prefix.PrefixCacheScorerPluginType, prefix.PrefixCachePluginFactory)
	fwkplugin.Register(picker.MaxScorePickerType, picker.MaxScorePickerFactory)
	fwkplugin.Register(picker.RandomPickerType, picker.RandomPickerFactory)
	fwkplugin.Register(picker.WeightedRandomPickerType, picker.WeightedRandomPickerFactory)
	fwkplugin.Register(profile.SingleProfileHandlerType, profile.SingleProfileHandlerFactory)
	fwkplugin.Register(kvcacheutilization.KvCacheUtilizationScorerType, kvcacheutilization.KvCacheUtilizationScorerFactory)
	fwkplugin.Register(queuedepth.QueueScorerType, queuedepth.QueueScorerFactory)
	fwkplugin.Register(runningrequests.RunningRequestsSizeScorerType, runningrequests.RunningRequestsSizeScorerFactory)
	fwkplugin.Register(loraaffinity.LoraAffinityScorerType, loraaffinity.LoraAffinityScorerFactory)
	fwkplugin.Register(tokenload.TokenLoadScorerType, tokenload.TokenLoadScorerFactory)
	fwkplugin.Register(fairness.GlobalStrictFairnessPolicyType, fairness.GlobalStrictFairnessPolicyFactory)
	fwkplugin.Register(fairness.RoundRobinFairnessPolicyType, fairness.RoundRobinFairnessPolicyFactory)
	fwkplugin.Register(ordering.FCFSOrderingPolicyType, ordering.FCFSOrderingPolicyFactory)
	fwkplugin.Register(ordering.EDFOrderingPolicyType, ordering.EDFOrderingPolicyFactory)
	fwkplugin.Register(ordering.SLODeadlineOrderingPolicyType, ordering.SLODeadlineOrderingPolicyFactory)
	fwkplugin.Register(usagelimits.StaticUsageLimitPolicyType, usagelimits.StaticPolicyFactory)
	fwkplugin.Register(reqdataprodprefix.ApproxPrefixCachePluginType, reqdataprodprefix.ApproxPrefixCacheFactory)
	fwkplugin.Register(predictedlatency.PredictedLatencyPluginType, predictedlatency.PredictedLatencyFactory)
	fwkplugin.Register(latencyproducer.LatencyDataProviderPluginType, latencyproducer.PredictedLatencyFactory)
	fwkplugin.Register(latencyslo.LatencyAdmissionPluginType, latencyslo.LatencyAdmissionFactory)
	fwkplugin.Register(prefixcacheaffinity.PluginType, prefixcacheaffinity.Factory)
	fwkplugin.Register(sloheadroomtier.PluginType, sloheadroomtier.Factory)
	fwkplugin.Register(latencyscorer.LatencyScorerType, latencyscorer.Factory)
	fwkplugin.Register(inflightload.InFlightLoadProducerType, inflightload.InFlightLoadProducerFactory)
	fwkplugin.Register(testfilter.HeaderBasedTestingFilterType, testfilter.HeaderBasedTestingFilterFactory)
	fwkplugin.Register(testresponsereceived.DestinationEndpointServedVerifierType, testresponsereceived.DestinationEndpointServedVerifierFactory)
	fwkplugin.Register(sourcemetrics.MetricsDataSourceType, sourcemetrics.MetricsDataSourceFactory)
	fwkplugin.Register(extractormetrics.MetricsExtractorType, extractormetrics.CoreMetricsExtractorFactory)
	fwkplugin.Register(sourcenotifications.NotificationSourceType, sourcenotifications.NotificationSourceFactory)
	fwkplugin.Register(sourcenotifications.EndpointNotificationSourceType, sourcenotifications.EndpointSourceFactory)
	fwkplugin.Register(requestattributereporter.RequestAttributeReporterType, requestattributereporter.RequestAttributeReporterPluginFactory)
	fwkplugin.Register(openai.OpenAIParserType, openai.OpenAIParserPluginFactory)
	fwkplugin.Register(vllmgrpc.VllmGRPCParserType, vllmgrpc.VllmGRPCParserPluginFactory)
	fwkplugin.Register(passthrough.PassthroughParserType, passthrough.PassthroughParserPluginFactory)
	fwkplugin.Register(concurrency.ConcurrencyDetectorType, concurrency.ConcurrencyDetectorFactory)
	fwkplugin.Register(utilization.UtilizationDetectorType, utilization.UtilizationDetectorFactory)
}

func newEndpointPoolFromOptions(namespace, name, endpointSelector string, endpointTargetPorts []int) (*datalayer.EndpointPool, error) {
	if namespace == "" {
		namespace = resolvePoolNamespace("")
	}
	if name == "" {
		return nil, errors.New("name must not be empty")
	}
	sel, err := labels.ConvertSelectorToLabelsMap(endpointSelector)
	if err != nil {
		return nil, fmt.Errorf("failed to parse endpoint selector %q: %w", endpointSelector, err)
	}
	pool := datalayer.NewEndpointPool(namespace, name)
	pool.Selector = sel
	pool.TargetPorts = append(pool.TargetPorts, endpointTargetPorts...)
	return pool, nil
}

func extractGKNN(poolName, poolGroup, poolNamespace, endpointSelector string) (*common.GKNN, error) {
	ns := resolvePoolNamespace(poolNamespace)
	if poolName != "" {
		return &common.GKNN{
			NamespacedName: types.NamespacedName{Name: poolName, Namespace: ns},
			GroupKind:      schema.GroupKind{Group: poolGroup, Kind: "InferencePool"},
		}, nil
	}
	if endpointSelector != "" {
		podName := os.Getenv("POD_NAME")
		if podName == "" {
			return nil, errors.New("failed to get environment variable POD_NAME")
		}
		m := regexp.MustCompile(`^(.+)-[a-z0-9]+-[a-z0-9]+$`).FindStringSubmatch(podName)
		if len(m) != 2 {
			return nil, fmt.Errorf("failed to parse deployment name from pod name %s", podName)
		}
		return &common.GKNN{
			NamespacedName: types.NamespacedName{Namespace: ns, Name: m[1]},
			GroupKind:      schema.GroupKind{Kind: "Deployment", Group: "apps"},
		}, nil
	}
	return nil, errors.New("can't construct gknn as both pool-name and endpoint-selector are missing")
}

func resolvePoolNamespace(ns string) string {
	if ns != "" {
		return ns
	}
	if e := os.Getenv("NAMESPACE"); e != "" {
		return e
	}
	return runserver.DefaultPoolNamespace
}

// noLeaderElection runs a runnable on every replica, leader or not (internal/runnable's
// NoLeaderElection).
type noLeaderElection struct{ manager.Runnable }

func (noLeaderElection) NeedLeaderElection() bool { return false }

// serveGRPC serves srv on lis until the context ends, then stops it gracefully
// (internal/runnable's GRPCServer, on a listener opened beforehand).
func serveGRPC(name string, srv *grpc.Server, lis net.Listener) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-ctx.Done():
				srv.GracefulStop()
			case <-done:
			}
		}()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("%s gRPC server: %w", name, err)
		}
		return nil
	})
}

// serverCreds is AsRunnable's TLS: --cert-path's tls.crt/tls.key (reloaded with
// --enable-cert-reload), else a self-signed certificate made at start.
func serverCreds(ctx context.Context, certPath string, reload bool) (credentials.TransportCredentials, error) {
	var cert tls.Certificate
	var err error
	if certPath != "" {
		cert, err = tls.LoadX509KeyPair(certPath+"/tls.crt", certPath+"/tls.key")
	} else {
		cert, err = selfSigned(time.Now())
	}
	if err != nil {
		return nil, fmt.Errorf("failed to create self signed certificate - %w", err)
	}
	if certPath != "" && reload {
		reloader, err := common.NewCertReloader(ctx, certPath, &cert)
		if err != nil {
			return nil, fmt.Errorf("failed to create cert reloader: %w", err)
		}
		return credentials.NewTLS(&tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return reloader.Get(), nil },
			NextProtos:     []string{"h2"},
		}), nil
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}), nil
}

// selfSigned is a P-256 certificate valid ten years (upstream's internal/tls makes an RSA-4096
// one, a second or more of CPU at every start; nobody verifies it either way).
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Inference Ext"}},
		NotBefore:             now.UTC(),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour).UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// healthServer is cmd/epp's (runner/health.go, unexported): without leader election every
// service name is SERVING once the datastore has synced the pool; with it, "liveness" always,
// "readiness", "" and the ext_proc service only on the synced leader.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	logger                logr.Logger
	datastore             datastore.Datastore
	isLeader              *atomic.Bool
	leaderElectionEnabled bool
}

func (s *healthServer) Check(_ context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	synced := s.datastore.PoolHasSynced()
	serving := func(ok bool) *healthpb.HealthCheckResponse {
		if ok {
			return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
		}
		s.logger.V(logutil.DEFAULT).Info("gRPC health check not serving", "service", in.Service, "synced", synced, "leader", s.isLeader.Load())
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}
	}
	if !s.leaderElectionEnabled {
		return serving(synced), nil
	}
	switch in.Service {
	case "readiness", "", extprocv3.ExternalProcessor_ServiceDesc.ServiceName:
		return serving(synced && s.isLeader.Load()), nil
	case "liveness":
		return serving(true), nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN}, nil
}

func (s *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	services := []string{extprocv3.ExternalProcessor_ServiceDesc.ServiceName}
	if s.leaderElectionEnabled {
		services = append(services, "liveness", "readiness")
	}
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for _, svc := range services {
		r, _ := s.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		out.Statuses[svc] = r
	}
	return out, nil
}

func (s *healthServer) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return status.Error(codes.Unimplemented, "Watch is not implemented")
}
