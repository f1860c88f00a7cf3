#!/usr/bin/python3
"""Writes the hand-described test servers as hwloc XML v2 (the format hwloc 2.x reads).

The machines are described below in plain Python (packages, NUMA nodes, caches, the PCI
tree with its switches, GPUs, NICs, NVLink bandwidths) so that a reviewer can check the
layout the unit tests assert against without reading thousands of XML attributes.
Run from this folder:  /usr/bin/python3 gen_topo.py   (then: hwloc-ls --input FILE); it also
writes the production-cluster shapes of topo_clusters.py.
"""
import itertools
from xml.sax.saxutils import quoteattr

GiB = 1 << 30


def bitmap(bits):
    """hwloc bitmap text: 32-bit words, most significant first ("0xffffffff,0x00000003")."""
    bits = set(bits)
    if not bits:
        return "0x0"
    words = [0] * (max(bits) // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join("0x%08x" % w for w in reversed(words))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = itertools.count(1)
        self.depth = 1

    def open(self, typ, attrs, infos=(), leaf=False):
        gp = next(self.gp)
        text = '<object type="%s"' % typ
        for k, v in attrs:
            text += " %s=%s" % (k, quoteattr(str(v)))
        text += ' gp_index="%d"' % gp
        pad = "  " * self.depth
        if leaf and not infos:
            self.lines.append(pad + text + "/>")
            return gp
        self.lines.append(pad + text + ">")
        for k, v in infos:
            self.lines.append(pad + "  <info name=%s value=%s/>" % (quoteattr(k), quoteattr(str(v))))
        if leaf:
            self.lines.append(pad + "</object>")
        else:
            self.depth += 1
        return gp

    def close(self):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</object>")


def sets(cpus, nodes):
    return [("cpuset", bitmap(cpus)), ("complete_cpuset", bitmap(cpus)),
            ("nodeset", bitmap(nodes)), ("complete_nodeset", bitmap(nodes))]


def cache(w, kind, size, depth, line, assoc, cpus, nodes, os_index):
    ctype = {"L3": 0, "L2": 0, "L1": 1}[kind]
    w.open(kind + "Cache", [("os_index", os_index)] + sets(cpus, nodes) +
           [("cache_size", size), ("depth", depth), ("cache_linesize", line),
            ("cache_associativity", assoc), ("cache_type", ctype)])


def core(w, os_index, pus, nodes, l2, l1):
    """L2 + L1d + Core + its hardware threads."""
    cache(w, "L2", l2, 2, 64, 20, pus, nodes, os_index)
    bare_core(w, os_index, pus, nodes, l1)
    w.close()


def bare_core(w, os_index, pus, nodes, l1):
    """L1d + Core + its hardware threads (for cores that share their L2)."""
    cache(w, "L1", l1, 1, 64, 12, pus, nodes, os_index)
    w.open("Core", [("os_index", os_index)] + sets(pus, nodes))
    for pu in pus:
        w.open("PU", [("os_index", pu)] + sets([pu], nodes), leaf=True)
    w.close(); w.close()


def pci(domain, bus, dev=0, fn=0):
    return "%04x:%02x:%02x.%x" % (domain, bus, dev, fn)


def host_bridge(w, first, last, domain=0):
    w.open("Bridge", [("bridge_type", "0-1"), ("depth", 0),
                      ("bridge_pci", "%04x:[%02x-%02x]" % (domain, first, last))])


def pci_bridge(w, busid, first, last, depth, ids="[8086:347a] [0000:0000] 04", speed="31.507692"):
    w.open("Bridge", [("bridge_type", "1-1"), ("depth", depth),
                      ("bridge_pci", "%s:[%02x-%02x]" % (busid[:4], first, last)), ("pci_busid", busid),
                      ("pci_type", "0604 " + ids), ("pci_link_speed", speed)])


def pci_dev(w, busid, cls, ids, infos, speed="31.507692"):
    w.open("PCIDev", [("pci_busid", busid), ("pci_type", "%s %s" % (cls, ids)),
                      ("pci_link_speed", speed)], infos)


def osdev(w, name, osdev_type, subtype=None, infos=()):
    attrs = [("name", name)]
    if subtype:
        attrs.append(("subtype", subtype))
    attrs.append(("osdev_type", osdev_type))
    return w.open("OSDev", attrs, infos, leaf=True)


def header(w, cpus, nodes, hostname, arch="x86_64", version="2.0"):
    w.lines += ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="%s">' % version]
    w.open("Machine", [("os_index", 0), ("cpuset", bitmap(cpus)), ("complete_cpuset", bitmap(cpus)),
                       ("allowed_cpuset", bitmap(cpus)), ("nodeset", bitmap(nodes)),
                       ("complete_nodeset", bitmap(nodes)), ("allowed_nodeset", bitmap(nodes))],
           [("OSName", "Linux"), ("HostName", hostname), ("Architecture", arch)])


def footer(w, distances=""):
    w.close()
    w.lines.append(distances)
    w.lines.append("</topology>")
    return "\n".join(l for l in w.lines if l) + "\n"


# ---- Server A: 2 x Xeon (16 cores, 2 threads), one NUMA node per socket, 8 NVIDIA A100
# PCIe GPUs and 4 ConnectX-6 HDR InfiniBand HCAs behind 4 PCIe switches (one GPU pair and
# one HCA per switch), NVLink bridges joining GPUs 0-1, 2-3, 4-5, 6-7, and a 1 GbE
# management port on socket 0's chipset.
#   socket 0: host bridge 16 has two root ports -> switches S0 (GPU0, GPU1, mlx5_0) and
#             S1 (GPU2, GPU3, mlx5_1): GPU0-GPU2 meet at the host bridge.
#   socket 1: host bridges 80 and a0, one root port + switch each -> S2 (GPU4, GPU5,
#             mlx5_2) and S3 (GPU6, GPU7, mlx5_3): GPU4-GPU6 meet only at the NUMA node.
def pcie_switch(w, root_port, up_bus, ids, speed, devices, domain=0):
    """Root port -> switch upstream port -> one downstream port per entry of `devices`,
    each a function of the port's bus that writes its device (left open)."""
    last = up_bus + 1 + len(devices)
    pci_bridge(w, root_port, up_bus, last, 1, speed=speed)
    pci_bridge(w, pci(domain, up_bus), up_bus + 1, last, 2, ids, speed)
    for port, device in enumerate(devices):
        bus = up_bus + 2 + port
        pci_bridge(w, pci(domain, up_bus + 1, port * 4), bus, bus, 3, ids, speed)
        device(bus)
        w.close()  # device
        w.close()  # downstream port
    w.close(); w.close()  # upstream port, root port


def gpu_switch(w, root_bus, root_dev, up_bus, gpus, hca):
    """Root port -> switch upstream port -> three downstream ports (two GPUs, one HCA)."""
    def hca_at(bus):
        pci_dev(w, pci(0, bus), "0207", "[15b3:101b] [15b3:0007] 00",
                [("PCIVendor", "Mellanox Technologies"), ("PCIDevice", "MT28908 Family [ConnectX-6]")])
        osdev(w, "ibp%ds0" % bus, 2, infos=[("Address", "00:00:10:29:fe:80:00:00:00:00:00:00:b8:ce:f6:03:00:%02x:00:%02x" % (bus, hca))])
        osdev(w, "mlx5_%d" % hca, 3, infos=[
            ("NodeGUID", "b8ce:f603:00%02x:00%02x" % (bus, hca)), ("SysImageGUID", "b8ce:f603:00%02x:00%02x" % (bus, hca)),
            ("Port1State", "4"), ("Port1LID", "0x%x" % (hca + 11)), ("Port1LMC", "0"),
            ("LinkSpeedMbps", "200000")])

    def gpu_at(child):
        def write(bus):
            pci_dev(w, pci(0, bus), "0302", "[10de:20b5] [10de:1533] a1",
                    [("PCIVendor", "NVIDIA Corporation"), ("PCIDevice", "GA100 [A100 PCIe 80GB]")])
            osdev(w, "cuda%d" % child, 5, "CUDA", [("GPUModel", "NVIDIA A100 80GB PCIe"),
                                                  ("CUDAGlobalMemorySize", "83886080")])
            NVML_GP[child] = osdev(w, "nvml%d" % child, 1, "NVML", [("GPUModel", "NVIDIA A100 80GB PCIe")])
        return write

    pcie_switch(w, pci(0, root_bus, root_dev), up_bus, "[1000:c010] [1000:a096] b0", "31.507692",
                [gpu_at(g) for g in gpus] + [hca_at])


def xeon_package(w, p, cores, pus_of, model, mem, l3, l3_assoc, l2, core_index):
    """An Intel socket with one NUMA node and one L3: opens the Package (the caller adds
    its PCI tree and closes it), its NUMA node, the L3 and the cores below it."""
    pcpus = [pu for c in range(cores) for pu in pus_of(p, c)]
    w.open("Package", [("os_index", p)] + sets(pcpus, [p]), [("CPUVendor", "GenuineIntel"), ("CPUModel", model)])
    w.open("NUMANode", [("os_index", p)] + sets(pcpus, [p]) + [("local_memory", mem)], leaf=True)
    cache(w, "L3", l3, 3, 64, l3_assoc, pcpus, [p], p)
    for c in range(cores):
        core(w, core_index(p, c), pus_of(p, c), [p], l2, 48 * 1024)
    w.close()  # L3


NVML_GP = {}


def server_a():
    w = Writer()
    cores, threads = 16, 2
    def pus_of(p, c):
        return [t * 32 + p * 16 + c for t in range(threads)]
    header(w, range(64), [0, 1], "gpu-node-01")
    for p in range(2):
        xeon_package(w, p, cores, pus_of, "Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz", 256 * GiB,
                     36 * 1024 * 1024, 12, 1280 * 1024, lambda p, c: c)
        if p == 0:
            host_bridge(w, 0x00, 0x03)
            pci_bridge(w, pci(0, 0, 0x1c), 0x03, 0x03, 1, "[8086:a190] [15d9:1c48] f0", "0.250000")
            pci_dev(w, pci(0, 3), "0200", "[8086:1533] [15d9:1533] 03",
                    [("PCIVendor", "Intel Corporation"), ("PCIDevice", "I210 Gigabit Network Connection")], "0.250000")
            osdev(w, "eno1", 2, infos=[("Address", "3c:ec:ef:10:20:30")])
            w.close(); w.close(); w.close()
            host_bridge(w, 0x16, 0x20)
            gpu_switch(w, 0x16, 0, 0x17, [0, 1], 0)   # buses 17-1b
            gpu_switch(w, 0x16, 2, 0x1c, [2, 3], 1)   # buses 1c-20
            w.close()
        else:
            host_bridge(w, 0x80, 0x85)
            gpu_switch(w, 0x80, 0, 0x81, [4, 5], 2)
            w.close()
            host_bridge(w, 0xa0, 0xa5)
            gpu_switch(w, 0xa0, 0, 0xa1, [6, 7], 3)
            w.close()
        w.close()  # Package
    # NVLink bridges (3 per pair, 4 links each, 25 GB/s per link and direction as NVML
    # reports it for A100: 300 GB/s between the two GPUs of a pair).
    n = 8
    vals = [[0] * n for _ in range(n)]
    for a in range(0, n, 2):
        vals[a][a + 1] = vals[a + 1][a] = 300000
    idx = " ".join(str(NVML_GP[g]) for g in range(n)) + " "
    u64 = " ".join(str(v) for row in vals for v in row) + " "
    dist = ('  <distances2 type="OSDev" nbobjs="%d" kind="9" name="NVLinkBandwidth" indexing="gp">\n'
            '    <indexes length="%d">%s</indexes>\n    <u64values length="%d">%s</u64values>\n'
            '  </distances2>') % (n, len(idx), idx, len(u64), u64)
    return footer(w, dist)


# ---- Server B: 2 x EPYC (16 cores, 2 threads) in NPS2 mode: two NUMA nodes per socket
# (8 cores each, two 4-core L3 domains each), no GPU, one 100 GbE Intel E810 port on the
# last NUMA node (socket 1), an NVMe drive and the BMC's ASPEED VGA on NUMA node 0 (a VGA
# that is not NVIDIA's, which must not count as a GPU).
def server_b():
    w = Writer()
    header(w, range(64), range(4), "epyc-node-07")
    for p in range(2):
        pcpus = [t * 32 + p * 16 + c for c in range(16) for t in range(2)]
        w.open("Package", [("os_index", p)] + sets(pcpus, [2 * p, 2 * p + 1]),
               [("CPUVendor", "AuthenticAMD"), ("CPUModel", "AMD EPYC 7313 16-Core Processor")])
        for h in range(2):
            numa = 2 * p + h
            ncpus = [t * 32 + p * 16 + c for c in range(8 * h, 8 * h + 8) for t in range(2)]
            w.open("Group", sets(ncpus, [numa]))
            w.open("NUMANode", [("os_index", numa)] + sets(ncpus, [numa]) + [("local_memory", 128 * GiB)], leaf=True)
            for ccd in range(2):
                first = 8 * h + 4 * ccd
                l3cpus = [t * 32 + p * 16 + c for c in range(first, first + 4) for t in range(2)]
                cache(w, "L3", 32 * 1024 * 1024, 3, 64, 16, l3cpus, [numa], numa * 2 + ccd)
                for c in range(first, first + 4):
                    core(w, p * 16 + c, [p * 16 + c, 32 + p * 16 + c], [numa], 512 * 1024, 32 * 1024)
                w.close()
            if numa == 0:
                host_bridge(w, 0x00, 0x03)
                pci_bridge(w, pci(0, 0, 1, 1), 0x01, 0x01, 1, "[1022:1483] [0000:0000] 00", "7.876923")
                pci_dev(w, pci(0, 1), "0108", "[144d:a80a] [144d:a812] 00",
                        [("PCIVendor", "Samsung Electronics Co Ltd"), ("PCIDevice", "NVMe SSD Controller PM9A1/PM9A3/980PRO")], "7.876923")
                osdev(w, "nvme0n1", 0, "Disk", [("Size", "3750738264"), ("SectorSize", "512")])
                w.close(); w.close()
                pci_bridge(w, pci(0, 0, 7, 1), 0x02, 0x03, 1, "[1022:1484] [0000:0000] 00", "0.250000")
                pci_bridge(w, pci(0, 2), 0x03, 0x03, 2, "[1a03:1150] [1a03:1150] 04", "0.250000")
                pci_dev(w, pci(0, 3), "0300", "[1a03:2000] [1a03:2000] 41",
                        [("PCIVendor", "ASPEED Technology, Inc."), ("PCIDevice", "ASPEED Graphics Family")], "0.250000")
                w.close(); w.close(); w.close()
                w.close()
            if numa == 3:
                host_bridge(w, 0xc0, 0xc1)
                pci_bridge(w, pci(0, 0xc0, 1, 1), 0xc1, 0xc1, 1, "[1022:1483] [0000:0000] 00")
                pci_dev(w, pci(0, 0xc1), "0200", "[8086:1592] [8086:0002] 02",
                        [("PCIVendor", "Intel Corporation"), ("PCIDevice", "Ethernet Controller E810-C for QSFP")])
                osdev(w, "ens6f0", 2, infos=[("Address", "b4:96:91:aa:bb:cc"), ("LinkSpeedMbps", "100000")])
                w.close(); w.close(); w.close()
            w.close()  # Group
        w.close()  # Package
    return footer(w)


# ---- Server C: 2 x Xeon (8 cores, 2 threads shown), one NUMA node per socket, 8 NVIDIA
# H100 SXM GPUs joined by four NVSwitches (each GPU has 18 NVLink links: 5, 4, 4 and 5 of
# them to the four switches, 25 GB/s each way per link as NVML reports it), and 4
# ConnectX-7 ports in Ethernet mode (RoCE, 400 Gb/s), one per PCIe switch with a GPU pair,
# as on HGX H100 boards. The NVSwitches sit on socket 1's last host bridge.
def server_c(driver=True):
    """driver=False: the same machine as hwloc sees it before the NVIDIA driver is loaded:
    the GPUs and NVSwitches are PCI devices only (no CUDA or NVML devices, no NVLink matrix)."""
    w = Writer()
    cores, threads = 8, 2
    def pus_of(p, c):
        return [t * 16 + p * 8 + c for t in range(threads)]
    header(w, range(32), [0, 1], "h100-node-03")
    switch_gp = []
    for p in range(2):
        xeon_package(w, p, cores, pus_of, "Intel(R) Xeon(R) Platinum 8480C", 1024 * GiB,
                     105 * 1024 * 1024, 15, 2048 * 1024, lambda p, c: p * cores + c)
        for s in range(2):
            pair = 2 * (2 * p + s)
            root = 0x10 + 0x40 * (2 * p + s)
            host_bridge(w, root, root + 5)
            hgx_switch(w, root, root + 1, [pair, pair + 1], 2 * p + s, driver)
            w.close()
        if p == 1:
            host_bridge(w, 0xf0, 0xf5)
            pci_bridge(w, pci(0, 0xf0, 1), 0xf1, 0xf5, 1)
            for k in range(4):
                switch_gp.append(w.open("PCIDev", [("subtype", "NVSwitch"), ("pci_busid", pci(0, 0xf2 + k)),
                                                    ("pci_type", "0680 [10de:22a3] [10de:1796] a1"),
                                                    ("pci_link_speed", "3.938462")],
                                        [("PCIVendor", "NVIDIA Corporation"), ("PCIDevice", "GH100 [H100 NVSwitch]")],
                                        leaf=True))
            w.close(); w.close()
        w.close()  # Package
    if not driver:
        return footer(w)
    links = [5, 4, 4, 5]
    objs = ["OSDev:%d" % H100_NVML_GP[g] for g in range(8)] + ["PCIDev:%d" % gp for gp in switch_gp]
    n = len(objs)
    vals = [[0] * n for _ in range(n)]
    for g in range(8):
        for k in range(4):
            vals[g][8 + k] = vals[8 + k][g] = links[k] * 25000
    idx = " ".join(objs) + " "
    u64 = " ".join(str(v) for row in vals for v in row) + " "
    dist = ('  <distances2hetero nbobjs="%d" kind="25" name="NVLinkBandwidth" indexing="gp">\n'
            '    <indexes length="%d">%s</indexes>\n    <u64values length="%d">%s</u64values>\n'
            '  </distances2hetero>') % (n, len(idx), idx, len(u64), u64)
    return footer(w, dist)


H100_NVML_GP = {}


def hgx_switch(w, root_bus, up_bus, gpus, nic, driver):
    """Root port -> PCIe switch -> two H100 SXM GPUs and one ConnectX-7 in Ethernet mode."""
    gen5 = "63.015385"

    def nic_at(bus):
        pci_dev(w, pci(0, bus), "0200", "[15b3:1021] [15b3:0041] 00",
                [("PCIVendor", "Mellanox Technologies"), ("PCIDevice", "MT2910 Family [ConnectX-7]")], gen5)
        osdev(w, "enp%ds0np0" % bus, 2, infos=[("Address", "94:6d:ae:10:%02x:%02x" % (bus, nic)),
                                               ("LinkSpeedMbps", "400000")])
        osdev(w, "mlx5_%d" % nic, 3, infos=[
            ("NodeGUID", "946d:ae03:0010:%02x%02x" % (bus, nic)), ("Port1State", "4"),
            ("Port1GID0", "fe80:0000:0000:0000:966d:aeff:fe10:%02x%02x" % (bus, nic)),
            ("LinkLayer", "Ethernet"), ("LinkSpeedMbps", "400000")])

    def gpu_at(child):
        def write(bus):
            pci_dev(w, pci(0, bus), "0302", "[10de:2330] [10de:16c1] a1",
                    [("PCIVendor", "NVIDIA Corporation"), ("PCIDevice", "GH100 [H100 SXM5 80GB]")], gen5)
            if driver:
                osdev(w, "cuda%d" % child, 5, "CUDA", [("GPUModel", "NVIDIA H100 80GB HBM3"),
                                                      ("CUDAGlobalMemorySize", "83886080")])
                H100_NVML_GP[child] = osdev(w, "nvml%d" % child, 1, "NVML", [("GPUModel", "NVIDIA H100 80GB HBM3")])
        return write

    pcie_switch(w, pci(0, root_bus, 1), up_bus, "[1000:c030] [1000:100b] b0", gen5,
                [gpu_at(g) for g in gpus] + [nic_at])


if __name__ == "__main__":
    with open("gpu8_ib4.xml", "w") as f:
        f.write(server_a())
    with open("epyc_nps2_eth.xml", "w") as f:
        f.write(server_b())
    with open("hgx_h100_roce.xml", "w") as f:
        f.write(server_c())
    with open("hgx_h100_nodriver.xml", "w") as f:
        f.write(server_c(driver=False))
    from topo_clusters import cluster_files
    for name, text in cluster_files().items():
        with open(name, "w") as f:
            f.write(text)
