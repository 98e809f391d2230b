set terminal svg size 800,500
set datafile separator ','
set key off
set grid
set output 'dose.svg'
set xlabel 'pre-norm row-start / regular RMS where appended blocks read'
set ylabel 'post-grow - pre-grow (nats/byte)'
plot 'points.csv' every ::1 using 4:5 with points pt 7 ps 0.8, 0.0027107337701149786 + 0.016328424453635554 * x with lines lw 2
unset output
