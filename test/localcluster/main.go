package main

import (
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/component-base/version"
)

func main() {}
