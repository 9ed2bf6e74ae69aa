from configparser import ConfigParser
from pathlib import Path
import setuptools, shutil
from setuptools.command.build_py import build_py

# note: all settings are in settings.ini; edit there, not here
config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o:cfg[o] for o in cfg_keys}

licenses = {
    'apache2': ('Apache Software License 2.0','OSI Approved :: Apache Software License'),
    'mit': ('MIT License', 'OSI Approved :: MIT License'),
}
statuses = [ '1 - Planning', '2 - Pre-Alpha', '3 - Alpha',
    '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive' ]
py_versions = '3.10 3.11 3.12 3.13'.split()

requirements = cfg.get('requirements','').split()
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
# every `NAME_requirements` key of settings.ini is the extra NAME: dev, cuda, serve, plots, widgets
extras = {k[:-len('_requirements')]: cfg[k].split() for k in cfg if k.endswith('_requirements')}

class build_py_with_kernels(build_py):
    "Ship `kernels/*.cu` (and headers) inside the package as `ddtree_nb/kernels/`, so installed wheels find them."
    def run(self):
        super().run()
        dst = Path(self.build_lib)/cfg['lib_path']/'kernels'
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(Path('kernels').glob('*')):
            if f.suffix in ('.cu', '.cuh', '.h'): shutil.copy(f, dst/f.name)

setuptools.setup(
    name = cfg['lib_name'],
    license = lic[0],
    classifiers = [
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: '+o for o in py_versions[py_versions.index(min_python):]] + (['License :: ' + lic[1] ] if lic[1] else []),
    url = cfg['git_url'],
    packages = setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path']+'.*']),
    include_package_data = True,
    install_requires = requirements,
    extras_require = extras,
    cmdclass = {'build_py': build_py_with_kernels},
    python_requires  = '>=' + cfg['min_python'],
    long_description = open('README.md', encoding='utf-8').read(),
    long_description_content_type = 'text/markdown',
    zip_safe = False,
    entry_points = {
        'console_scripts': cfg.get('console_scripts').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']
    },
    **setup_cfg)
