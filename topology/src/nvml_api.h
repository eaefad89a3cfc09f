#pragma once
// The few NVML types and entry points discovery uses, declared here with the C ABI of nvml.h
// (NVML API version 12) so that refit builds without NVML and loads it with dlopen at run time.
// The test suite's fake NVML library implements these same declarations.

namespace refit::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

// nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2).
struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];  // "00000000:19:00.0"
};

// nvmlGpuFabricInfo_v2_t, read through nvmlDeviceGetGpuFabricInfoV.
struct FabricInfoV2 {
  unsigned int version;
  unsigned char cluster_uuid[16];
  Return status;
  unsigned int clique_id;
  unsigned char state;  // nvmlGpuFabricState_t
  unsigned int health_mask;
};
// NVML_STRUCT_VERSION(GpuFabricInfo, 2): the struct size with the version in the top byte.
inline constexpr unsigned int kFabricInfoV2Version =
    static_cast<unsigned int>(sizeof(FabricInfoV2)) | (2u << 24);
inline constexpr unsigned char kFabricStateCompleted = 3;

inline constexpr unsigned int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper, Blackwell)
inline constexpr int kEnabled = 1;               // nvmlEnableState_t NVML_FEATURE_ENABLED
// nvmlIntNvLinkDeviceType_t
inline constexpr int kRemoteGpu = 0;
inline constexpr int kRemoteSwitch = 2;

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using GetCountFn = Return (*)(unsigned int*);
using GetHandleByIndexFn = Return (*)(unsigned int, Device*);
using GetPciInfoFn = Return (*)(Device, PciInfo*);
using GetNameFn = Return (*)(Device, char*, unsigned int);
using GetCudaComputeCapabilityFn = Return (*)(Device, int*, int*);
using GetNvLinkStateFn = Return (*)(Device, unsigned int, int*);
using GetNvLinkRemotePciInfoFn = Return (*)(Device, unsigned int, PciInfo*);
using GetNvLinkRemoteDeviceTypeFn = Return (*)(Device, unsigned int, int*);
using GetGpuFabricInfoVFn = Return (*)(Device, FabricInfoV2*);

}  // namespace refit::nvml
