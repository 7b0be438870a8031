"""Built-in knowledge providers."""

from sleuth.scans.providers.python_packages import (
    PackageRiskReport,
    PythonPackagesProvider,
    package_risk_research,
    package_tools,
    register_package_scan,
)

__all__ = [
    "PackageRiskReport",
    "PythonPackagesProvider",
    "package_risk_research",
    "package_tools",
    "register_package_scan",
]
