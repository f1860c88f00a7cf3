#!/usr/bin/python3
"""The test servers shaped like production cluster nodes (imported by gen_topo.py, which
writes every file; the helpers are gen_topo.py's)."""
from gen_topo import GiB, Writer, bare_core, cache, core, footer, header, host_bridge, osdev, pci, pci_bridge, \
    pci_dev, pcie_switch, sets


# ---- Shapes of production clusters whose files the library did not write: no
# LinkSpeedMbps or LinkLayer infos, so NIC speeds are unknown and only the PCIe link
# speed hwloc records (pci_link_speed) tells a 1 GbE management port from the fabric.

def numa_node(w, os_index, cpus, mem, subtype=None, infos=()):
    """A NUMA node. hwloc gives every memory child its parent's cpuset, so a memory-only
    node (HBM, MCDRAM, GPU memory, CXL) carries the CPUs of the object it hangs off."""
    attrs = [("subtype", subtype)] if subtype else []
    w.open("NUMANode", attrs + [("os_index", os_index)] + sets(cpus, [os_index]) + [("local_memory", mem)],
           infos, leaf=True)


def nic_function(w, busid, cls, ids, vendor, device, speed, osdevs):
    """A network PCI function (left open for the caller to close) and its OS devices:
    (name, osdev_type, subtype) with type 2 a network interface, 3 an OpenFabrics device."""
    pci_dev(w, busid, cls, ids, [("PCIVendor", vendor), ("PCIDevice", device)], speed)
    for name, osdev_type, subtype in osdevs:
        osdev(w, name, osdev_type, subtype)


AMD_ROOT_PORT, INTEL_ROOT_PORT, IBM_ROOT_PORT = ("[1022:1483] [0000:0000] 00", "[8086:347a] [0000:0000] 04",
                                                  "[1014:04c1] [0000:0000] 00")


def on_root_port(w, domain, hb_bus, port, bus, write, speed, ids=AMD_ROOT_PORT):
    """Host bridge -> root port -> the device `write` puts on `bus`."""
    host_bridge(w, hb_bus, bus, domain)
    pci_bridge(w, pci(domain, hb_bus, port), bus, bus, 1, ids, speed)
    write(pci(domain, bus))
    w.close(); w.close(); w.close()  # device, root port, host bridge


def gbe_port(w, busid):
    """An Intel I350 1 GbE port (PCIe 2.0 x4: hwloc reports 2 GB/s), the usual management
    interface of cluster nodes."""
    nic_function(w, busid, "0200", "[8086:1521] [15d9:1521] 01", "Intel Corporation",
                 "I350 Gigabit Network Connection", "2.000000", [("eno1", 2, None)])


def l3_cores(w, core_ids, pus_of, nodes, l3, per_l3, l2, l1, first_l3):
    """The cores in L3 domains of `per_l3` cores each."""
    for k in range(0, len(core_ids), per_l3):
        group = core_ids[k:k + per_l3]
        cache(w, "L3", l3, 3, 64, 16, [pu for c in group for pu in pus_of(c)], nodes, first_l3 + k // per_l3)
        for c in group:
            core(w, c, pus_of(c), nodes, l2, l1)
        w.close()


# ---- Server D: IBM Power System AC922 (Power9, as in Summit and Sierra): 2 x 8-core
# POWER9 (SMT4), DDR on NUMA nodes 0 and 8, and 4 V100 SXM2 GPUs, two per socket behind
# a PCIe switch, whose 16 GiB each hwloc shows as memory-only NUMA nodes 252-255 (subtype
# GPUMemory, as hwloc exports them with HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1). NVLink 2.0
# joins the two GPUs of a socket (3 links, 75 GB/s) and each GPU to its CPU (3 links):
# hwloc's NVLinkBandwidth matrix then mixes GPUs and Packages, with no NVSwitch. One
# ConnectX-5 EDR HCA per socket, and a BCM5719 1 GbE management port on socket 0.
P9_GPU_BUS = {0: ["0004:03:00.0", "0004:04:00.0"], 1: ["0035:03:00.0", "0035:04:00.0"]}


def power9():
    w = Writer()
    cores, threads = 8, 4
    ddr = [0, 8]
    gpumem = {0: [252, 253], 1: [254, 255]}
    def pus_of(p, c):
        return [p * 32 + c * threads + t for t in range(threads)]
    header(w, range(64), ddr + gpumem[0] + gpumem[1], "power9-gpu-02", arch="ppc64le")
    nvml, pkg_gp = {}, []
    for p in range(2):
        pcpus = [pu for c in range(cores) for pu in pus_of(p, c)]
        nodes = [ddr[p]] + gpumem[p]
        pkg_gp.append(w.open("Package", [("os_index", 8 * p)] + sets(pcpus, nodes),
                             [("CPUModel", "POWER9, altivec supported"), ("CPURevision", "2.2 (pvr 004e 1202)")]))
        numa_node(w, ddr[p], pcpus, 256 * GiB)
        for k, os_index in enumerate(gpumem[p]):
            numa_node(w, os_index, pcpus, 16 * GiB, "GPUMemory", [("PCIBusID", P9_GPU_BUS[p][k])])
        for pair in range(cores // 2):  # L3 and L2 per core pair
            pair_cpus = pus_of(p, 2 * pair) + pus_of(p, 2 * pair + 1)
            cache(w, "L3", 10 * 1024 * 1024, 3, 128, 20, pair_cpus, nodes, p * 4 + pair)
            cache(w, "L2", 512 * 1024, 2, 128, 8, pair_cpus, nodes, p * 4 + pair)
            for c in (2 * pair, 2 * pair + 1):
                bare_core(w, p * cores + c, pus_of(p, c), nodes, 32 * 1024)
            w.close(); w.close()
        nic_domain, gpu_domain = (0x0003, 0x0004) if p == 0 else (0x0033, 0x0035)
        on_root_port(w, nic_domain, 0, 0, 1, lambda b, p=p: nic_function(
            w, b, "0207", "[15b3:1019] [1014:0617] 00", "Mellanox Technologies",
            "MT28800 Family [ConnectX-5 Ex]", "15.753846", [("ib%d" % p, 2, None), ("mlx5_%d" % p, 3, None)]),
            "15.753846", IBM_ROOT_PORT)
        host_bridge(w, 0, 4, gpu_domain)

        def gpu_at(k, p=p):
            def write(bus):
                pci_dev(w, pci(gpu_domain, bus), "0302", "[10de:1db1] [10de:1212] a1",
                        [("PCIVendor", "NVIDIA Corporation"), ("PCIDevice", "GV100GL [Tesla V100 SXM2 16GB]")],
                        "15.753846")
                g = 2 * p + k
                osdev(w, "cuda%d" % g, 5, "CUDA", [("GPUModel", "Tesla V100-SXM2-16GB")])
                nvml[g] = osdev(w, "nvml%d" % g, 1, "NVML", [("GPUModel", "Tesla V100-SXM2-16GB")])
            return write
        pcie_switch(w, pci(gpu_domain, 0), 1, "[10b5:8725] [0000:0000] ca", "15.753846",
                    [gpu_at(0), gpu_at(1)], gpu_domain)
        w.close()  # GPU host bridge
        # The NVLink bricks of the socket (IBM NPU, a bridge hwloc replaces with the CPU).
        host_bridge(w, 0, 0, 0x0007 + p)
        w.open("PCIDev", [("pci_busid", pci(0x0007 + p, 0)), ("pci_type", "0680 [1014:04ea] [1014:04ea] 00")],
               [("PCIVendor", "IBM"), ("PCIDevice", "POWER9 NVLink 2.0")], leaf=True)
        w.close()
        if p == 0:
            on_root_port(w, 0x0005, 0, 0, 1, lambda b: nic_function(
                w, b, "0200", "[14e4:1657] [1014:0420] 01", "Broadcom Inc. and subsidiaries",
                "NetXtreme BCM5719 Gigabit Ethernet PCIe", "2.000000", [("enP5p1s0f0", 2, None)]), "2.000000",
                IBM_ROOT_PORT)
        w.close()  # Package
    # hwloc's matrix: the GPUs first, then the CPUs they link to; 25 GB/s per NVLink 2.0
    # link and direction, a high artificial value on the diagonal.
    objs = ["OSDev:%d" % nvml[g] for g in range(4)] + ["Package:%d" % gp for gp in pkg_gp]
    n = len(objs)
    vals = [[1000000 if i == j else 0 for j in range(n)] for i in range(n)]
    for p in range(2):
        a, b = 2 * p, 2 * p + 1
        vals[a][b] = vals[b][a] = 75000
        for g in (a, b):
            vals[g][4 + p] = vals[4 + p][g] = 75000
    return footer(w, hetero_matrix("NVLinkBandwidth", objs, vals))


def hetero_matrix(name, objs, vals):
    idx = " ".join(objs) + " "
    u64 = " ".join(str(v) for row in vals for v in row) + " "
    return ('  <distances2hetero nbobjs="%d" kind="25" name="%s" indexing="gp">\n'
            '    <indexes length="%d">%s</indexes>\n    <u64values length="%d">%s</u64values>\n'
            '  </distances2hetero>') % (len(objs), name, len(idx), idx, len(u64), u64)


def numa_latency(nodes, dist):
    idx = " ".join(str(n) for n in nodes) + " "
    u64 = " ".join(str(dist(a, b)) for a in nodes for b in nodes) + " "
    return ('  <distances2 type="NUMANode" nbobjs="%d" kind="5" name="NUMALatency" indexing="os">\n'
            '    <indexes length="%d">%s</indexes>\n    <u64values length="%d">%s</u64values>\n'
            '  </distances2>') % (len(nodes), len(idx), idx, len(u64), u64)


# ---- Servers E: CPU-only cluster nodes, 2 sockets of 8 cores (2 threads), a 1 GbE
# management port on the first NUMA node and the fabric NIC on another one, the way
# hwloc sees them before the library has written a speed into the file:
#   epyc_ib_mgmt:       EPYC in NPS2 (NUMA 0-3); ConnectX-6 HDR InfiniBand on NUMA 1;
#                       plus a CXL memory expander (NUMA 4, CPU-less, hanging off the
#                       machine as hwloc leaves it with HWLOC_USE_NUMA_DISTANCES=1),
#                       closest to socket 1 by the NUMALatency matrix.
#   xeon_opa_mgmt:      Xeon (one NUMA node per socket); Omni-Path HFI on socket 1.
#   epyc_slingshot_mgmt: EPYC in NPS1; HPE Cray Cassini (Slingshot 11) on socket 1, with
#                       its cxi0 device and hsn0 interface (hwloc subtype Slingshot).
#   xeon_efa:           an AWS-style Xeon: the ENA interface (ens5) on socket 0 and an
#                       EFA device (efa_0, no IP interface) on socket 1; a VM, so hwloc
#                       knows no PCIe link speeds.
def cpu_node(hostname, vendor, model, numas_per_socket, fabric, mgmt, extra_nodes=(), distances="",
             version="2.0"):
    w = Writer()
    cores, threads = 8, 2
    total = 2 * cores
    def pus_of(c):
        return [t * total + c for t in range(threads)]
    numas = 2 * numas_per_socket
    all_nodes = list(range(numas)) + [n for n, _, _ in extra_nodes]
    header(w, range(total * threads), all_nodes, hostname, version=version)
    for os_index, mem, subtype in extra_nodes:  # memory-only nodes of the whole machine
        numa_node(w, os_index, range(total * threads), mem, subtype)
    per_numa = cores // numas_per_socket
    for p in range(2):
        pnodes = list(range(p * numas_per_socket, (p + 1) * numas_per_socket))
        pcpus = [pu for c in range(p * cores, (p + 1) * cores) for pu in pus_of(c)]
        w.open("Package", [("os_index", p)] + sets(pcpus, pnodes), [("CPUVendor", vendor), ("CPUModel", model)])
        for node in pnodes:
            core_ids = list(range(node * per_numa, (node + 1) * per_numa))
            ncpus = [pu for c in core_ids for pu in pus_of(c)]
            if numas_per_socket > 1:
                w.open("Group", sets(ncpus, [node]))
            numa_node(w, node, ncpus, 128 * GiB)
            l3_cores(w, core_ids, pus_of, [node], 32 * 1024 * 1024, 4, 512 * 1024, 32 * 1024, 2 * node)
            for where, write in ((mgmt[0], mgmt[1]), (fabric[0], fabric[1])):
                if where == node:
                    bus = 0x20 * node + 1
                    on_root_port(w, 0, bus - 1, 1, bus, lambda b: write(w, b), "31.507692",
                                 AMD_ROOT_PORT if vendor == "AuthenticAMD" else INTEL_ROOT_PORT)
            if numas_per_socket > 1:
                w.close()  # Group
        w.close()  # Package
    return footer(w, distances)


def cx6_hdr(w, busid):
    nic_function(w, busid, "0207", "[15b3:101b] [15b3:0007] 00", "Mellanox Technologies",
                 "MT28908 Family [ConnectX-6]", "31.507692", [("ib0", 2, None), ("mlx5_0", 3, None)])


def opa_hfi(w, busid):
    nic_function(w, busid, "0208", "[8086:24f0] [8086:2628] 11", "Intel Corporation",
                 "Omni-Path HFI Silicon 100 Series [discrete]", "15.753846", [("ib0", 2, None), ("hfi1_0", 3, None)])


def cassini(w, busid):
    nic_function(w, busid, "0200", "[17db:0501] [17db:0501] 02", "Cray Inc",
                 "Cassini 1 [Slingshot 200Gb]", "31.507692", [("cxi0", 2, "Slingshot"), ("hsn0", 2, "Slingshot")])


def ena(w, busid):
    nic_function(w, busid, "0200", "[1d0f:ec20] [1d0f:ec20] 00", "Amazon.com, Inc.",
                 "Elastic Network Adapter (ENA)", "0.000000", [("ens5", 2, None)])


def efa(w, busid):
    nic_function(w, busid, "0200", "[1d0f:efa1] [1d0f:efa1] 00", "Amazon.com, Inc.",
                 "Elastic Fabric Adapter (EFA)", "0.000000", [("efa_0", 3, None)])


def cpu_nodes():
    genoa = "AMD EPYC 9124 16-Core Processor"
    def latency(a, b):  # CXL node 4 sits behind socket 1 (nodes 2, 3)
        if a == b:
            return 10
        if 4 in (a, b):
            return 30 if min(a, b) >= 2 else 50
        return 12 if a // 2 == b // 2 else 32
    lat = numa_latency([0, 1, 2, 3, 4], latency)
    return {
        "epyc_ib_mgmt.xml": cpu_node("epyc-ib-11", "AuthenticAMD", genoa, 2, (1, cx6_hdr), (0, gbe_port),
                                     [(4, 256 * GiB, "CXL-DRAM")], lat),
        "xeon_opa_mgmt.xml": cpu_node("xeon-opa-05", "GenuineIntel", "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", 1,
                                      (1, opa_hfi), (0, gbe_port)),
        "epyc_slingshot_mgmt.xml": cpu_node("epyc-hsn-21", "AuthenticAMD", "AMD EPYC 7763 64-Core Processor", 1,
                                            (1, cassini), (0, gbe_port)),
        "xeon_efa.xml": cpu_node("ip-10-0-0-12", "GenuineIntel", "Intel(R) Xeon(R) Platinum 8488C", 1,
                                 (1, efa), (0, ena)),
        # The first of them (without the expander) under the version tag of hwloc 3.x's default
        # export (XML v3), which hwloc 2.x refuses.
        "epyc_ib_mgmt_v3.xml": cpu_node("epyc-ib-11", "AuthenticAMD", genoa, 2, (1, cx6_hdr), (0, gbe_port),
                                        version="3.0"),
    }


# ---- Servers F: high-bandwidth memory in flat mode, where hwloc hangs the HBM as a
# second, memory-only NUMA node off the object that holds the cores and the IO devices,
# so that object spans two NUMA nodes.
#   xeon_max_flat: 2 x Xeon Max 9480 (8 cores shown, 2 threads), SNC off: DDR on NUMA 0
#     and 1, HBM on NUMA 2 and 3, written without subtypes as hwloc before 2.8 exports
#     them (the DDR node is listed first); the management port on package 0, a
#     ConnectX-7 NDR InfiniBand HCA on package 1, both hanging off the package.
#   knl_flat_opa: Xeon Phi 7250 (KNL, 16 of its 68 cores shown, 4 threads) in quadrant
#     flat mode: DDR on NUMA 0 (subtype DRAM), the 16 GiB MCDRAM on NUMA 1 (subtype
#     MCDRAM), an Omni-Path HFI and a 1 GbE port off the package.
def hbm_package(w, p, os_index, model, vendor, core_ids, pus_of, nodes, subtypes, mem, l2_per, l3, io):
    pcpus = [pu for c in core_ids for pu in pus_of(c)]
    w.open("Package", [("os_index", os_index)] + sets(pcpus, nodes), [("CPUVendor", vendor), ("CPUModel", model)])
    for node, subtype, size in zip(nodes, subtypes, mem):
        numa_node(w, node, pcpus, size, subtype)
    if l3:
        cache(w, "L3", l3, 3, 64, 15, pcpus, nodes, p)
    for k in range(0, len(core_ids), l2_per):
        tile = core_ids[k:k + l2_per]
        cache(w, "L2", 2 * 1024 * 1024 if l2_per == 1 else 1024 * 1024, 2, 64, 16,
              [pu for c in tile for pu in pus_of(c)], nodes, tile[0])
        for c in tile:
            bare_core(w, c, pus_of(c), nodes, 48 * 1024 if l3 else 32 * 1024)
        w.close()
    if l3:
        w.close()
    for k, write in enumerate(io):
        bus = 0x80 * p + 0x10 * k + 1
        on_root_port(w, 0, bus - 1, 1, bus, lambda b: write(w, b), "63.015385", INTEL_ROOT_PORT)
    w.close()  # Package


def cx7_ndr(w, busid):
    nic_function(w, busid, "0207", "[15b3:1021] [15b3:0041] 00", "Mellanox Technologies",
                 "MT2910 Family [ConnectX-7]", "63.015385", [("ibp129s0", 2, None), ("mlx5_0", 3, None)])


def xeon_max_flat():
    w = Writer()
    cores, threads = 8, 2
    def pus_of(c):
        return [t * 2 * cores + c for t in range(threads)]
    header(w, range(2 * cores * threads), range(4), "xeonmax-04")
    for p in range(2):
        hbm_package(w, p, p, "Intel(R) Xeon(R) CPU Max 9480", "GenuineIntel", list(range(p * cores, (p + 1) * cores)),
                    pus_of, [p, 2 + p], [None, None], [256 * GiB, 64 * GiB], 1, 112 * 1024 * 1024,
                    [gbe_port] if p == 0 else [cx7_ndr])
    return footer(w)


def knl_flat_opa():
    w = Writer()
    cores, threads = 16, 4
    def pus_of(c):
        return [t * cores + c for t in range(threads)]
    header(w, range(cores * threads), [0, 1], "knl-0042")
    hbm_package(w, 0, 0, "Intel(R) Xeon Phi(TM) CPU 7250 @ 1.40GHz", "GenuineIntel", list(range(cores)), pus_of,
                [0, 1], ["DRAM", "MCDRAM"], [96 * GiB, 16 * GiB], 2, 0, [gbe_port, opa_hfi])
    return footer(w)


def cluster_files():
    """File name -> XML text of every server of this module."""
    files = {"power9_v100_nvlink.xml": power9(), "xeon_max_flat.xml": xeon_max_flat(),
             "knl_flat_opa.xml": knl_flat_opa()}
    files.update(cpu_nodes())
    return files
