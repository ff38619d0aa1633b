"""Django's admin as an app whose site is ``review.admin_site.MedAlignAdminSite``.

Apart from the site it names, so that INSTALLED_APPS can load this module before any model
exists: the site's module imports the access rules, which need the models.
"""

from django.contrib.admin.apps import AdminConfig


class MedAlignAdminConfig(AdminConfig):
    default_site = "review.admin_site.MedAlignAdminSite"
